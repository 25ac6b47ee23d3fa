"""Cleaning up after pods that are gone (kubelet's HandlePodCleanups and orphaned pod dirs).

After the first list, the processes of checkpointed pods this node no longer runs get the stop
signal and SIGKILL after the minimum window, as for a force-deleted pod (their objects were
deleted while no agent watched). A pod's directory under the data dir (logs, volumes,
checkpoint) is removed once the pod object is gone and nothing of it can still run.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
from pathlib import Path
from typing import Any

from kubelite.agent import checkpoint
from kubelite.agent.runtime.interface import Runtime
from kubelite.agent.termination import MIN_STOP_WINDOW
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]


async def stop_orphans(runtime: Runtime, clock: Clock, leftovers: dict[str, tuple[Path, Obj]]) -> None:
    for directory, saved in leftovers.values():
        handles = [checkpoint.recover(runtime, c) for c in (saved.get("containers") or {}).values()]
        live = [h for h in handles if h is not None and h.alive]
        for h in live:
            runtime.signal(h, signal.SIGTERM)
        if live:
            log.info("stopping %d process(es) of pod %s/%s, which is gone", len(live), saved.get("namespace"),
                     saved.get("name"))
            await bounded(clock, asyncio.gather(*(h.exited() for h in live)), MIN_STOP_WINDOW)
            for h in live:
                runtime.kill(h)
            await asyncio.gather(*(h.exited() for h in live))
        checkpoint.remove(directory)  # the directory itself goes with the pod object (remove_orphan_dirs)


def remove_pod_dir(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def remove_orphan_dirs(pods_dir: Path, known: set[str]) -> None:
    """Remove the directory of every pod (`<namespace>_<name>_<uid>`) whose uid is not in `known`."""
    if not pods_dir.is_dir():
        return
    for directory in pods_dir.iterdir():
        if directory.is_dir() and directory.name.rsplit("_", 1)[-1] not in known:
            remove_pod_dir(directory)
