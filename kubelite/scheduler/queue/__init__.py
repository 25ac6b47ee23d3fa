"""The scheduling queue (backend/queue): the queue proper and the nominator it carries."""

from kubelite.scheduler.queue.nominator import Nominator
from kubelite.scheduler.queue.scheduling_queue import QueuedPod, SchedulingQueue

__all__ = ["Nominator", "QueuedPod", "SchedulingQueue"]
