"""One pod-sync code path, two runtimes: the hollow runtime on a fake clock and real processes.

The same pods go through the same PodWorkers + PodSync (the runtime is injected); the outcome a
user sees — phase, exit codes, restart counts, the terminal status before the grace-0 delete —
is the same. The hollow run takes no real time; the process run takes a few seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.runtime.hollow import HollowRuntime
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.clock import FakeClock, RealClock, rfc3339
from tests.unit.test_pod_worker import Harness

Obj = dict[str, Any]

# (name, container command for each runtime, restartPolicy, delete after (s), wanted phase, exit code, restarts)
CASES = [
    pytest.param(["hollow", "--run", "1", "--exit", "3"], ["sh", "-c", "sleep 1; exit 3"], "Never", None,
                 "Failed", 3, 0, id="exits 3 under Never: Failed"),
    pytest.param(["hollow", "--run", "1", "--exit", "0"], ["sh", "-c", "sleep 1"], "OnFailure", None,
                 "Succeeded", 0, 0, id="exits 0 under OnFailure: Succeeded"),
    pytest.param(["hollow"], ["sleep", "30"], "Always", 1.0, "Failed", 143, 0,
                 id="deleted: stop signal, terminal status, then the delete"),
]


def _runtime(kind: str, tmp: Path) -> tuple[Harness, Callable[[float], Awaitable[None]]]:
    if kind == "hollow":
        clock = FakeClock()
        return Harness(tmp, clock=clock, runtime=HollowRuntime(clock)), clock.advance
    real = RealClock()
    return Harness(tmp, clock=real, runtime=ProcessRuntime(real)), real.sleep


@pytest.mark.parametrize("kind", ["hollow", "process"])
@pytest.mark.parametrize("hollow_cmd,process_cmd,policy,delete_after,want_phase,want_code,want_restarts", CASES)
async def test_same_pod_sync_for_both_runtimes(tmp_path: Path, kind: str, hollow_cmd: list[str],
                                               process_cmd: list[str], policy: str, delete_after: float | None,
                                               want_phase: str, want_code: int, want_restarts: int) -> None:
    h, advance = _runtime(kind, tmp_path)
    h.base_env = {"PATH": "/usr/bin:/bin", "D": str(tmp_path)}
    command = hollow_cmd if kind == "hollow" else process_cmd
    pod: Obj = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                "spec": {"restartPolicy": policy, "terminationGracePeriodSeconds": 5,
                         "containers": [{"name": "main", "image": "x", "command": command}]}}
    h.pod_workers.update_pod(pod)
    task = h.pod_workers.pods["u1"].task
    assert task is not None
    if delete_after is not None:
        await advance(delete_after)
        h.pod_workers.update_pod({**pod, "metadata": {**pod["metadata"],
                                                      "deletionTimestamp": rfc3339(h.clock.now())}})
    for _ in range(100):
        if task.done():
            break
        await advance(0.1)
    await asyncio.wait_for(task, 10)
    status = h.statuses[-1][1]
    main = status["containerStatuses"][0]
    code = main["state"].get("terminated", main["lastState"].get("terminated", {})).get("exitCode")
    assert (status["phase"], code, main["restartCount"]) == (want_phase, want_code, want_restarts)
    assert (h.deleted_at is not None) == (delete_after is not None)
