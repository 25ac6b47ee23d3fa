"""What the recorder makes of a timeline pod's container statuses and of repeated Events: every exit, restart
and back-off delay is a step (not only the first exit), and each repeat of an Event — the correlator's count
bump on the same Event — is logged and drawn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.sim.clock import VirtualClock, VirtualTimeLoop
from kubelite.sim.recorder import Recorder, Timeline, _container_steps
from kubelite.store.memory import MemoryStore

Obj = dict[str, Any]
EXIT_1 = {"terminated": {"exitCode": 1, "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}
EXIT_2 = {"terminated": {"exitCode": 1, "startedAt": "2026-01-01T00:00:20Z", "finishedAt": "2026-01-01T00:00:25Z"}}


def _pod(state: Obj, restarts: int = 0, last: Obj | None = None) -> Obj:
    return {"status": {"containerStatuses": [{"name": "main", "state": state, "restartCount": restarts,
                                              **({"lastState": last} if last else {})}]}}


def _backoff(delay: str) -> Obj:
    return {"waiting": {"reason": "CrashLoopBackOff",
                        "message": f"back-off {delay} restarting failed container=main pod=p_default(uid)"}}


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
CASES = [
    pytest.param(_pod(RUNNING), _pod(EXIT_1), ["main exited 1"], id="an exit not restarted shows as its state"),
    pytest.param(_pod(RUNNING), _pod(_backoff("10s"), 0, EXIT_1), ["main exited 1", "main back-off 10s"],
                 id="an exit restarted later shows as a new lastState, with its back-off delay"),
    pytest.param(_pod(_backoff("10s"), 1, EXIT_1), _pod(RUNNING, 2, EXIT_1), ["main restart 2"],
                 id="a restart shows as a higher restartCount"),
    pytest.param(_pod(_backoff("10s"), 1, EXIT_1), _pod(_backoff("20s"), 1, EXIT_1), ["main back-off 20s"],
                 id="a longer back-off shows though only the message changed"),
    pytest.param(_pod(RUNNING, 1, EXIT_1), _pod(_backoff("20s"), 1, EXIT_2), ["main exited 1", "main back-off 20s"],
                 id="a second exit with the same code is a step of its own"),
    pytest.param(_pod(EXIT_1), _pod(RUNNING, 1, EXIT_1), ["main restart 1"],
                 id="an exit seen as the state is not seen again as the lastState"),
    pytest.param(_pod(RUNNING, 1, EXIT_1), _pod(RUNNING, 1, EXIT_1), [], id="an unchanged status is no step"),
]


@pytest.mark.parametrize("old,new,steps", CASES)
def test_container_steps(old: Obj, new: Obj, steps: list[str]) -> None:
    life = Timeline()
    _container_steps(life, 7.0, old, new)
    assert life.steps == [(7.0, s) for s in steps]


def _event(count: int, uid: str = "e1") -> Obj:
    return {"metadata": {"uid": uid, "name": "p.1"}, "reason": "BackOff", "message": "Back-off restarting",
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "count": count}


EVENT_CASES = [
    pytest.param([_event(1)], [None], 1, id="an Event is logged once"),
    pytest.param([_event(1), _event(2), _event(3)], [None, 2, 3], 3, id="each count bump is logged and drawn"),
    pytest.param([_event(1), _event(1), _event(2), _event(2)], [None, 2], 2,
                 id="an Event written again without a repeat is not logged again"),
    pytest.param([_event(3)], [3], 1, id="an Event first seen repeated says its count"),
]


@pytest.mark.parametrize("events,logged,drawn", EVENT_CASES)
def test_repeated_events(events: list[Obj], logged: list[int | None], drawn: int) -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)

    async def record() -> Recorder:  # the handlers as the recorder's informers call them
        recorder = Recorder(InProcessClient(ApiServer(MemoryStore(), clock)), clock, 0.0, ["p"])
        recorder._pod_added({"metadata": {"namespace": "default", "name": "p", "uid": "u"}, "spec": {}})
        for e in events:
            recorder._event(e)
        return recorder

    try:
        recorder = loop.run_until_complete(record())
    finally:
        loop.close()
    lines = [json.loads(line) for line in recorder.events_log().splitlines()]
    assert [e.get("count") for e in lines if e.get("event") == "BackOff"] == logged
    assert [s for _, s in recorder.latest["default/p"].steps].count("BackOff") == drawn
