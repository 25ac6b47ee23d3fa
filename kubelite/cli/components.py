"""`kubelite agent` and `kubelite scheduler`: one component as a client of a running API server.

Kept apart from `serve` (the control plane) so that these commands do not import the API
server: an agent that `kubelite up` restarts after a crash is back sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvloop

from kubelite.agent import config as node_config
from kubelite.agent.agent import Agent
from kubelite.agent.cgroups import Cgroups
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.client.http import ApiClient
from kubelite.clock import RealClock
from kubelite.scheduler import config as scheduler_config
from kubelite.scheduler.scheduler import Scheduler


def run_agent(kubeconfig: Path, node_name: str, data_dir: Path, config_file: Path | None, address: str,
              port: int, shutdown_grace: float | None = None) -> int:
    """`kubelite agent`: a node agent for this machine, as a client of a running API server."""
    cfg = node_config.load(config_file)
    if shutdown_grace is not None:
        cfg.shutdown_grace_period = shutdown_grace
    data_dir.mkdir(parents=True, exist_ok=True)
    runtime = ProcessRuntime(RealClock(), Cgroups.detect())
    uvloop.run(run_component(lambda client: Agent(client, RealClock(), node_name, data_dir, cfg, runtime, address,
                                                  port).run(), ApiClient.from_kubeconfig(kubeconfig)))
    return 0


def run_scheduler(kubeconfig: Path, config_file: Path | None, seed: int | None) -> int:
    """`kubelite scheduler`: the scheduler alone, as a client of a running API server."""
    cfg = scheduler_config.load(config_file)
    uvloop.run(run_component(lambda client: Scheduler(client, RealClock(), cfg, seed).run(),
                             ApiClient.from_kubeconfig(kubeconfig)))
    return 0


async def run_component(start: Callable[[ApiClient], Coroutine[Any, Any, None]], client: ApiClient) -> None:
    stop = stop_on_signals()
    task = asyncio.create_task(start(client))
    await stop.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await client.close()


def stop_on_signals() -> asyncio.Event:
    """SIGINT (Ctrl-C) and SIGTERM set the returned event instead of raising KeyboardInterrupt mid-await."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
