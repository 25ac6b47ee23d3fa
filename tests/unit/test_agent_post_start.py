"""A failed postStart hook as kuberuntime_container.go startContainer handles it, and the hooks' failure messages
as lifecycle/handlers.go handlerRunner.Run words them.

The pod worker runs on a fake clock with the hollow runtime (exact times); a `tcpSocket` hook is one kubelet's
handlerRunner cannot run ("Cannot run handler: invalid handler"), so it fails without any I/O. The messages come
from real child processes and a real HTTP server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.hooks import run_hook
from kubelite.clock import RealClock
from tests.conftest import free_port
from tests.unit.test_pod_worker import Harness, _c, _pod, _start

Obj = dict[str, Any]
BAD_HOOK = {"tcpSocket": {"port": 1}}
INVALID = f"Cannot run handler: invalid handler: {BAD_HOOK}"


@pytest.mark.parametrize("policy,args,grace,state,killed_at", [
    pytest.param("Always", (), 30, {"waiting": {"reason": "PostStartHookError", "message": INVALID}}, 0.0,
                 id="restartPolicy Always: waits as PostStartHookError with the hook's message until restarted"),
    pytest.param("Never", (), 30, {"terminated": 143}, 0.0,
                 id="restartPolicy Never: stays Terminated, as the stop signal ended it"),
    pytest.param("OnFailure", ("--ignore-term",), 5, {"waiting": {"reason": "PostStartHookError", "message": INVALID}},
                 5.0, id="a container ignoring the stop signal: SIGKILL when the pod's grace period ends"),
])
async def test_failed_post_start_kills_the_container(tmp_path: Path, policy: str, args: tuple[str, ...], grace: int,
                                                     state: Obj, killed_at: float) -> None:
    h = Harness(tmp_path)
    container = _c("main", *args, lifecycle={"postStart": BAD_HOOK})
    _, task = await _start(h, _pod([container], policy=policy, grace=grace))
    await h.clock.advance(grace)
    # FailedPostStartHook with its fixed text, then killContainer's Killing with the message it was given
    assert [(t, reason, message) for t, reason, message in h.events][:5] == [
        (0.0, "Pulled", 'Container image "hollow" already present on machine'),
        (0.0, "Created", "Created container main"), (0.0, "Started", "Started container main"),
        (0.0, "FailedPostStartHook", "PostStartHook failed"), (0.0, "Killing", "FailedPostStartHook")]
    first = next(st for _, st in h.statuses if st["containerStatuses"][0]["lastState"] or
                 "terminated" in st["containerStatuses"][0]["state"])
    status = first["containerStatuses"][0]
    if "terminated" in state:
        assert status["state"]["terminated"]["exitCode"] == state["terminated"]
        assert h.phase() == "Failed"  # once the pod's termination is done (its phase is held until then)
    else:
        assert status["state"] == state
        assert status["lastState"]["terminated"]["exitCode"] == (137 if killed_at else 143)
        assert next(t for t, st in h.statuses if st["containerStatuses"][0]["lastState"]) == killed_at
    # no status ever showed the container running (the kill was part of the start), nor ready
    assert not any("running" in st["containerStatuses"][0]["state"] or st["containerStatuses"][0]["ready"]
                   for _, st in h.statuses)
    task.cancel()


async def test_restarts_after_a_failed_post_start_back_off(tmp_path: Path) -> None:
    """The first restart is at once, the next after 10 s (kubelet's back-off), in CrashLoopBackOff meanwhile."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([_c("main", lifecycle={"postStart": BAD_HOOK})]))
    await h.clock.advance(5)
    assert [t for t, reason, _ in h.events if reason == "Started"] == [0.0, 0.0]
    assert h.container("main")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert h.container("main")["restartCount"] == 1
    await h.clock.advance(6)
    assert [t for t, reason, _ in h.events if reason == "Started"] == [0.0, 0.0, 10.0]
    task.cancel()


CLOSED = free_port()
POD = "p_default(u1)"
HOOKS = [
    pytest.param({"exec": {"command": ["sh", "-c", "echo out; echo err >&2; exit 3"]}},
                 'Exec lifecycle hook ([sh -c echo out; echo err >&2; exit 3]) for Container "c" in Pod '
                 '"p_default(u1)" failed - error: command \'sh -c echo out; echo err >&2; exit 3\' exited with 3: '
                 'err\n, message: "out\\nerr\\n"',
                 id="exec exiting 3: the runtime's CodeExitError with stderr, then stdout and stderr quoted"),
    pytest.param({"exec": {"command": ["sh", "-c", "true"]}}, "", id="exec exiting 0: success"),
    pytest.param({"httpGet": {"path": "/hook", "port": "SERVER"}}, "",
                 id="httpGet answered 500: success, upstream reads no status code"),
    pytest.param({"httpGet": {"path": "/hook", "port": CLOSED}},
                 f'HTTP lifecycle hook (/hook) for Container "c" in Pod "p_default(u1)" failed - error: '
                 f'Get "http://127.0.0.1:{CLOSED}/hook": dial tcp 127.0.0.1:{CLOSED}: connect: connection refused',
                 id="httpGet to a closed port: the url.Error"),
    pytest.param({"sleep": {"seconds": 0}}, "", id="sleep: success"),
    pytest.param(BAD_HOOK, INVALID, id="tcpSocket: no handler kubelet runs for a hook"),
]


@pytest.mark.parametrize("handler,message", HOOKS)
async def test_hook_failure_message(server_port: int, handler: Obj, message: str) -> None:
    if handler.get("httpGet", {}).get("port") == "SERVER":
        handler = {"httpGet": {**handler["httpGet"], "port": server_port}}
    assert await run_hook(handler, {"name": "c"}, {"PATH": "/usr/bin:/bin"}, "127.0.0.1", RealClock(), POD) == message
