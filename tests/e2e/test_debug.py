"""`kubectl debug` with ephemeral containers, the real kubectl against `kubelite up` (a real agent).

kubectl v1.32 adds the container with a strategic merge PATCH of pods/ephemeralcontainers, waits for it to run and
attaches (`-it`) or returns. The agent starts each ephemeral container once and never again, reports it in
`status.ephemeralContainerStatuses`, and serves logs, exec and attach for it as for any container.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, get_pod, pod_phase, sh, wait_for
from tests.e2e.test_streaming import Terminal

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def app(up: ServerProcess) -> str:
    apply_pod(up, "app", [sh("app", "echo app-started; sleep 3600")], terminationGracePeriodSeconds=1)
    assert wait_for(lambda: pod_phase(up, "app") == "Running")
    return "app"


def ephemeral_status(c: ServerProcess, pod: str, name: str) -> dict[str, Any]:
    statuses = get_pod(c, pod).get("status", {}).get("ephemeralContainerStatuses") or []
    return next((dict(s) for s in statuses if s["name"] == name), {})


def terminated(c: ServerProcess, pod: str, name: str) -> dict[str, Any]:
    return dict(ephemeral_status(c, pod, name).get("state", {}).get("terminated") or {})


def test_debug_adds_a_container_that_runs_once(up: ServerProcess, app: str) -> None:
    res = up.kubectl("debug", app, "--image=busybox", "--target=app", "-c", "once", "--",
                     "sh", "-c", "echo from-debugger; exit 3")
    assert 'Targeting container "app"' in res.stdout + res.stderr
    spec = get_pod(up, app)["spec"]["ephemeralContainers"]
    assert [(c["name"], c["targetContainerName"], c["imagePullPolicy"]) for c in spec] == [("once", "app", "Always")]
    assert wait_for(lambda: terminated(up, app, "once").get("exitCode") == 3)
    status = ephemeral_status(up, app, "once")
    assert (status["restartCount"], status["ready"], "started" in status) == (0, False, False)
    assert up.kubectl("logs", app, "-c", "once").stdout == "from-debugger\n"
    time.sleep(1.5)  # a container the pod's policy (Always) restarted would be back at once: the first restart is
    assert ephemeral_status(up, app, "once") == status  # immediate
    pod = get_pod(up, app)
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert (pod["status"]["phase"], ready["Ready"], pod["status"]["containerStatuses"][0]["restartCount"]) == \
        ("Running", "True", 0)
    started = up.kubectl("get", "events", "--field-selector", "involvedObject.name=app,reason=Started").stdout
    assert started.count("Started container once") == 1


def test_debug_interactive_in_a_terminal(up: ServerProcess, app: str) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for the terminal tests (apt-get install tmux; .ci/run installs it)")
    t = Terminal(up, f"debug-{os.getpid()}", f"kubectl debug -it {app} --image=busybox --target=app -c shell -- sh",
                 {})
    try:
        assert t.shows("If you don't see a command prompt, try pressing enter.", timeout=30), t.screen()
        t.type("")
        assert t.shows("#"), t.screen()
        t.type("echo $((6*7)); tty")
        assert t.shows("42") and t.shows("/dev/pts/"), t.screen()
        t.type("exit")
        assert t.shows("Session ended, the ephemeral container will not be restarted") and t.shows("rc=0"), \
            t.screen()
    finally:
        t.close()
    assert wait_for(lambda: terminated(up, app, "shell").get("exitCode") == 0)
    assert ephemeral_status(up, app, "shell")["restartCount"] == 0


def test_exec_attach_and_logs_of_a_running_debug_container(up: ServerProcess, app: str) -> None:
    up.kubectl("debug", "-i", "--attach=false", app, "--image=busybox", "-c", "reader", "--",
               "sh", "-c", "echo waiting; read line; echo got:$line")
    assert wait_for(lambda: "running" in ephemeral_status(up, app, "reader").get("state", {}))
    assert up.kubectl("exec", app, "-c", "reader", "--", "sh", "-c", "echo exec:$HOSTNAME").stdout == "exec:app\n"
    res = up.kubectl("attach", "-i", app, "-c", "reader", stdin="hello\n")
    assert "got:hello" in res.stdout
    assert wait_for(lambda: terminated(up, app, "reader").get("exitCode") == 0)
    assert up.kubectl("logs", app, "-c", "reader").stdout == "waiting\ngot:hello\n"
    gone = up.kubectl("exec", app, "-c", "reader", "--", "true", check=False)
    assert gone.returncode != 0 and 'container "reader" in pod "app" is not running' in gone.stderr


def test_a_target_that_is_not_running_holds_the_container(up: ServerProcess) -> None:
    """getTargetID: no running target, no start — CreateContainerConfigError until it runs (here: never)."""
    apply_pod(up, "two", [sh("main", "sleep 3600"), sh("short", "exit 0")], restartPolicy="Never",
              terminationGracePeriodSeconds=1)
    assert wait_for(lambda: any(c["name"] == "short" and "terminated" in c["state"]
                                for c in get_pod(up, "two").get("status", {}).get("containerStatuses") or []))
    up.kubectl("debug", "two", "--image=busybox", "--target=short", "-c", "dbg", "--", "true")
    assert wait_for(lambda: "waiting" in ephemeral_status(up, "two", "dbg").get("state", {}))
    assert ephemeral_status(up, "two", "dbg")["state"]["waiting"] == {
        "reason": "CreateContainerConfigError", "message": "unable to find target container short"}
    assert pod_phase(up, "two") == "Running"
    up.kubectl("delete", "pod", "two", "--grace-period=1")
