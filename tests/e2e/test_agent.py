"""The node agent with real processes and signals, driven through the API with the real kubectl (L1-L7,
L12-L15, L20). `kubelite up` runs the control plane and the agent; containers are shell processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubelite.agent.cgroups import Cgroups
from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import agent_pid, alive, apply_pod, container_status, get_pod, pod_phase, proc_stats, sh, wait_for

pytestmark = pytest.mark.e2e

def test_pod_runs_logs_and_stops_gracefully(up: ServerProcess) -> None:
    apply_pod(up, "web", [sh("main", "trap 'echo bye; exit 0' TERM; while true; do echo tick $(POD); sleep 0.2; done",
                           env=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])],
           terminationGracePeriodSeconds=10)
    assert wait_for(lambda: pod_phase(up, "web") == "Running")
    row = up.kubectl("get", "pod", "web").stdout.splitlines()[1].split()
    assert row[1:3] == ["1/1", "Running"]
    pod = get_pod(up, "web")
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    assert wait_for(lambda: "tick web" in up.kubectl("logs", "web", "--tail=1").stdout)
    follow = subprocess.Popen(["kubectl", "logs", "-f", "web"], env={**os.environ, "KUBECONFIG": str(up.kubeconfig),
                                                                   "HOME": str(up.home)},
                              stdout=subprocess.PIPE, text=True)
    first = follow.stdout.readline() if follow.stdout else ""
    assert first.startswith("tick web")
    start = time.monotonic()
    up.kubectl("delete", "pod", "web")  # waits until the agent removed the object
    assert time.monotonic() - start < 5  # the trap exits at once on SIGTERM
    out, _ = follow.communicate(timeout=10)
    assert follow.returncode == 0 and "bye" in out
    assert get_pod(up, "web") == {}


@pytest.mark.parametrize("policy,code,phase,restarts", [
    ("Never", 1, "Failed", False), ("Never", 0, "Succeeded", False), ("OnFailure", 0, "Succeeded", False),
    ("OnFailure", 1, "Running", True), ("Always", 0, "Running", True), ("Always", 1, "Running", True)])
def test_restart_policy_with_exit_code(up: ServerProcess, policy: str, code: int, phase: str, restarts: bool) -> None:
    name = f"exit-{policy.lower()}-{code}"
    apply_pod(up, name, [sh("main", f"echo finishing; exit {code}")], restartPolicy=policy)
    if restarts:
        assert wait_for(lambda: container_status(up, name, "main").get("restartCount", 0) >= 1)
        term = container_status(up, name, "main")["lastState"]["terminated"]
    else:
        assert wait_for(lambda: pod_phase(up, name) == phase)
        term = container_status(up, name, "main")["state"]["terminated"]
        assert container_status(up, name, "main")["restartCount"] == 0
    assert pod_phase(up, name) == phase
    assert "finishing" in up.kubectl("logs", name).stdout  # a finished container's logs stay readable
    assert term["exitCode"] == code and term["reason"] == ("Completed" if code == 0 else "Error")
    up.kubectl("delete", "pod", name, "--grace-period=1")


def test_always_restarts_into_crash_loop_backoff(up: ServerProcess) -> None:
    apply_pod(up, "crasher", [sh("main", "echo run; exit 1")])
    assert wait_for(lambda: container_status(up, "crasher", "main").get("restartCount", 0) >= 2)
    st = container_status(up, "crasher", "main")
    assert st["lastState"]["terminated"]["exitCode"] == 1
    assert wait_for(lambda: "CrashLoopBackOff" in up.kubectl("get", "pod", "crasher").stdout)
    assert pod_phase(up, "crasher") == "Running"
    assert "run" in up.kubectl("logs", "crasher", "--previous").stdout
    up.kubectl("delete", "pod", "crasher", "--grace-period=1")


def test_seed_000_restart_on_exit_codes(up: ServerProcess) -> None:
    """restartPolicyRules: restart on exit code 42 although the pod says Never."""
    rules = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
    apply_pod(up, "restart-on-exit-codes", [sh("main", "sleep 0.3; exit 42", restartPolicy="Never",
                                             restartPolicyRules=rules)], restartPolicy="Never")
    assert wait_for(lambda: container_status(up, "restart-on-exit-codes", "main").get("restartCount", 0) >= 1)
    up.kubectl("delete", "pod", "restart-on-exit-codes", "--grace-period=1")


@pytest.mark.parametrize("name,pod_policy,init_policy", [
    ("init container Never in an Always pod fails the pod (seed 000 fail-pod-if-init-fails)", "Always", "Never"),
    ("init failure under a Never pod fails the pod", "Never", None),
])
def test_init_failure_without_restart_fails_the_pod(up: ServerProcess, name: str, pod_policy: str,
                                                    init_policy: str | None) -> None:
    pod = f"init-fails-{pod_policy.lower()}"
    failing = sh("init-2", "echo Failing initialization; exit 1", **({"restartPolicy": init_policy}
                                                                    if init_policy else {}))
    apply_pod(up, pod, [sh("main", "sleep 30")], restartPolicy=pod_policy,
              initContainers=[sh("init-1", "echo one"), failing, sh("init-3", "echo never")])
    assert wait_for(lambda: pod_phase(up, pod) == "Failed")
    assert container_status(up, pod, "init-1")["state"]["terminated"]["exitCode"] == 0
    assert container_status(up, pod, "init-2")["state"]["terminated"]["exitCode"] == 1
    assert container_status(up, pod, "init-2")["restartCount"] == 0
    assert "terminated" not in container_status(up, pod, "init-3").get("state", {})
    assert "running" not in container_status(up, pod, "main").get("state", {})
    up.kubectl("delete", "pod", pod)


def test_seed_000_on_failure_pod(up: ServerProcess) -> None:
    """Pod OnFailure: the container with its own restartPolicy Never runs once, the other is restarted."""
    apply_pod(up, "on-failure-pod", [
        sh("try-once-container", 'echo "Only running once" && sleep 1 && exit 1', restartPolicy="Never"),
        sh("on-failure-container", 'echo "Keep restarting" && sleep 1 && exit 1')], restartPolicy="OnFailure")
    assert wait_for(lambda: container_status(up, "on-failure-pod", "on-failure-container").get("restartCount", 0)
                    >= 2)
    once = container_status(up, "on-failure-pod", "try-once-container")
    assert once["restartCount"] == 0 and once["state"]["terminated"]["exitCode"] == 1
    assert pod_phase(up, "on-failure-pod") == "Running"
    assert up.kubectl("logs", "on-failure-pod", "-c", "try-once-container").stdout == "Only running once\n"
    up.kubectl("delete", "pod", "on-failure-pod", "--grace-period=1")


def test_init_containers_in_order_then_sidecar_and_app(up: ServerProcess, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    apply_pod(up, "ordered", [sh("app", f"echo app >> {trace}; trap 'echo app-stop >> {trace}; exit 0' TERM; "
                                      "while true; do sleep 0.1; done")],
           initContainers=[sh("first", f"echo first >> {trace}"),
                           sh("side", f"echo side >> {trace}; trap 'echo side-stop >> {trace}; exit 0' TERM; "
                                       "while true; do sleep 0.1; done", restartPolicy="Always",
                               startupProbe={"exec": {"command": ["grep", "-q", "side", str(trace)]},
                                             "periodSeconds": 1}),
                           sh("second", f"echo second >> {trace}")], terminationGracePeriodSeconds=5)
    assert wait_for(lambda: pod_phase(up, "ordered") == "Running")
    assert "Init" not in up.kubectl("get", "pod", "ordered").stdout
    up.kubectl("delete", "pod", "ordered")
    assert trace.read_text().split() == ["first", "side", "second", "app", "app-stop", "side-stop"]


def test_sigterm_ignored_waits_for_the_grace_period(up: ServerProcess) -> None:
    apply_pod(up, "stubborn", [sh("main", "trap '' TERM; while true; do sleep 0.1; done")],
           terminationGracePeriodSeconds=3)
    assert wait_for(lambda: pod_phase(up, "stubborn") == "Running")
    start = time.monotonic()
    up.kubectl("delete", "pod", "stubborn")
    elapsed = time.monotonic() - start
    assert 3.0 <= elapsed <= 3.0 + 1.0, elapsed  # never early, at most 1 s late (kubectl included)


def test_stop_signal_and_force_delete_kill_the_process_group(up: ServerProcess, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    apply_pod(up, "forced", [sh("main", f"echo $$$$ > {pidfile}; trap '' TERM; sleep 1000 & wait",
                              lifecycle={"stopSignal": "SIGINT"})], terminationGracePeriodSeconds=30)
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
    pid = int(pidfile.read_text())
    res = up.kubectl("delete", "pod", "forced", "--grace-period=0", "--force")
    assert "Immediate deletion does not wait" in res.stderr

    def dead() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    assert wait_for(dead, 10)  # processes of a force-deleted pod are still killed (short grace)


def test_unknown_image_without_command_fails_clearly(up: ServerProcess) -> None:
    apply_pod(up, "no-entry", [{"name": "main", "image": "example.com/unknown:1"}])
    assert wait_for(lambda: container_status(up, "no-entry", "main").get("state", {}).get("waiting", {}).get("reason")
                 == "CreateContainerConfigError")
    assert "CreateContainerConfigError" in up.kubectl("get", "pod", "no-entry").stdout
    up.kubectl("delete", "pod", "no-entry", "--grace-period=1")
    apply_pod(up, "catalog", [{"name": "main", "image": "example.com/echo:1"}])
    assert wait_for(lambda: "from-catalog" in up.kubectl("logs", "catalog", check=False).stdout)
    up.kubectl("delete", "pod", "catalog", "--grace-period=1")


def test_node_side_admission_refuses_what_does_not_fit(up: ServerProcess) -> None:
    node = json.loads(up.kubectl("get", "nodes", "-o", "json").stdout)["items"][0]["metadata"]["name"]
    apply_pod(up, "too-big", [{"name": "main", "image": "busybox", "command": ["true"],
                            "resources": {"requests": {"cpu": "1000"}}}], nodeName=node)
    assert wait_for(lambda: pod_phase(up, "too-big") == "Failed")
    assert get_pod(up, "too-big")["status"]["reason"] == "OutOfcpu"
    up.kubectl("delete", "pod", "too-big")


def test_up_restarts_its_killed_agent_and_leaves_no_process_when_stopped(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(data), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = ServerProcess(data, port, proc, tmp_path / "home")
    (tmp_path / "home").mkdir()
    try:
        assert wait_for(lambda: (data / "kubeconfig").exists() and "Ready" in c.kubectl("get", "nodes",
                                                                                      check=False).stdout)
        pidfile = tmp_path / "pid"
        apply_pod(c, "orphan-check", [sh("main", f"echo $$$$ > {pidfile}; while true; do sleep 0.1; done")])
        assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "")
        pid = int(pidfile.read_text())
        container_id = container_status(c, "orphan-check", "main")["containerID"]
        first = agent_pid(proc.pid)
        os.kill(first, signal.SIGKILL)
        assert wait_for(lambda: _agent(proc.pid) not in (None, first))  # the supervisor started another
        assert wait_for(lambda: c.kubectl("logs", "orphan-check", check=False).returncode == 0)  # it serves logs
        time.sleep(1)
        # the new agent re-adopted the container rather than starting another one
        assert alive(pid) and int(pidfile.read_text()) == pid
        st = container_status(c, "orphan-check", "main")
        assert (st["containerID"], st["restartCount"]) == (container_id, 0) and "running" in st["state"]
    finally:
        c.stop(signal.SIGTERM)
    assert wait_for(lambda: not alive(pid), 10)


def _agent(up_pid: int) -> int | None:
    try:
        return agent_pid(up_pid)
    except LookupError:
        return None


def _ready(c: ServerProcess, name: str) -> str:
    conds = get_pod(c, name).get("status", {}).get("conditions") or []
    return next((x["status"] for x in conds if x["type"] == "Ready"), "")


def test_readiness_http_probe_and_readiness_gate(up: ServerProcess) -> None:
    port = free_port()
    apply_pod(up, "probed", [sh("main", f"sleep 1.5; exec python3 -m http.server {port} --bind 127.0.0.1",
                              readinessProbe={"httpGet": {"path": "/", "port": port}, "periodSeconds": 1})],
           readinessGates=[{"conditionType": "example.com/gate"}])
    assert wait_for(lambda: pod_phase(up, "probed") == "Running")
    assert _ready(up, "probed") == "False"
    assert wait_for(lambda: container_status(up, "probed", "main").get("ready") is True)
    assert _ready(up, "probed") == "False"  # the readiness gate is still missing (counts as False)
    up.kubectl("patch", "pod", "probed", "--subresource=status", "--type=strategic", "-p",
               '{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}')
    assert wait_for(lambda: _ready(up, "probed") == "True")
    assert "1/1" in up.kubectl("get", "pod", "probed", "-o", "wide").stdout
    up.kubectl("delete", "pod", "probed", "--grace-period=1")


def test_liveness_exec_failure_restarts_and_startup_gates(up: ServerProcess, tmp_path: Path) -> None:
    flag = tmp_path / "started"
    apply_pod(up, "lively", [sh("main", f"sleep 1; touch {flag}; while true; do sleep 0.1; done",
                              startupProbe={"exec": {"command": ["test", "-f", str(flag)]}, "periodSeconds": 1,
                                            "failureThreshold": 10},
                              livenessProbe={"exec": {"command": ["false"]}, "periodSeconds": 1,
                                             "failureThreshold": 2, "terminationGracePeriodSeconds": 1})])
    assert wait_for(lambda: pod_phase(up, "lively") == "Running")
    assert container_status(up, "lively", "main").get("started") is False  # the startup probe has not passed yet
    assert wait_for(lambda: container_status(up, "lively", "main").get("restartCount", 0) >= 1, 30)
    events = up.kubectl("get", "events", "--field-selector", "involvedObject.name=lively").stdout
    assert "Unhealthy" in events and "Liveness probe failed" in events
    up.kubectl("delete", "pod", "lively", "--grace-period=1")


def test_post_start_and_pre_stop_hooks(up: ServerProcess, tmp_path: Path) -> None:
    post, pre = tmp_path / "post", tmp_path / "pre"
    apply_pod(up, "hooked", [sh("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done", lifecycle={
        "postStart": {"exec": {"command": ["sh", "-c", f"echo started > {post}"]}},
        "preStop": {"exec": {"command": ["sh", "-c", f"sleep 1; echo stopping > {pre}"]}}})],
           terminationGracePeriodSeconds=10)
    assert wait_for(lambda: pod_phase(up, "hooked") == "Running")
    assert wait_for(lambda: post.exists())
    start = time.monotonic()
    up.kubectl("delete", "pod", "hooked")
    assert time.monotonic() - start >= 1.0  # preStop ran (and finished) before the stop signal
    assert pre.read_text().strip() == "stopping"


def test_pre_stop_sleep_overrun_gets_the_two_second_extension(up: ServerProcess) -> None:
    apply_pod(up, "overrun", [sh("main", "trap '' TERM; while true; do sleep 0.1; done",
                               lifecycle={"preStop": {"sleep": {"seconds": 30}}})],
           terminationGracePeriodSeconds=2)
    assert wait_for(lambda: pod_phase(up, "overrun") == "Running")
    start = time.monotonic()
    up.kubectl("delete", "pod", "overrun")
    elapsed = time.monotonic() - start
    assert 3.5 <= elapsed <= 5.5, elapsed  # 2 s grace spent in preStop, then the 2 s window, then SIGKILL
    events = up.kubectl("get", "events", "--field-selector", "involvedObject.name=overrun").stdout
    assert "FailedPreStopHook" not in events  # executePreStopHook: an overrun is only logged


def test_second_delete_shortens_the_grace_period(up: ServerProcess) -> None:
    apply_pod(up, "shorten", [sh("main", "trap '' TERM; while true; do sleep 0.1; done")],
           terminationGracePeriodSeconds=60)
    assert wait_for(lambda: pod_phase(up, "shorten") == "Running")
    up.kubectl("delete", "pod", "shorten", "--wait=false")
    time.sleep(0.5)
    start = time.monotonic()
    up.kubectl("delete", "pod", "shorten", "--grace-period=2")
    assert time.monotonic() - start <= 5


def test_readme_quick_start_kubectl_run(up: ServerProcess) -> None:
    up.kubectl("run", "hello", "--image=busybox", "--", "sh", "-c", "while true; do echo hello; sleep 0.2; done")
    assert wait_for(lambda: "hello" in up.kubectl("logs", "hello", "--tail=1", check=False).stdout)
    up.kubectl("delete", "pod", "hello")
    assert get_pod(up, "hello") == {}


def test_empty_dir_shared_between_sidecar_and_app(up: ServerProcess, tmp_path: Path) -> None:
    mount = str(tmp_path / "shared")
    apply_pod(up, "shared", [sh("app", f"while [ ! -f {mount}/msg ]; do sleep 0.1; done; cat {mount}/msg; "
                                     "while true; do sleep 0.2; done",
                              volumeMounts=[{"name": "data", "mountPath": mount}])],
           initContainers=[sh("writer", f"echo from-sidecar > {mount}/msg; while true; do sleep 0.2; done",
                               restartPolicy="Always", volumeMounts=[{"name": "data", "mountPath": mount}])],
           volumes=[{"name": "data", "emptyDir": {}}])
    assert wait_for(lambda: "from-sidecar" in up.kubectl("logs", "shared", "-c", "app", check=False).stdout)
    assert not (tmp_path / "shared" / "msg").exists()  # the file lives in the pod's emptyDir, not the host path
    up.kubectl("delete", "pod", "shared", "--grace-period=1")


needs_cgroups = pytest.mark.skipif(Cgroups.detect() is None, reason="no writable cgroup hierarchy on this host")


@needs_cgroups
def test_memory_limit_kills_the_container_as_oom_killed(up: ServerProcess) -> None:
    hog = [sys.executable, "-c", "import time; x = bytearray(400 * 1024 * 1024); time.sleep(30)"]
    apply_pod(up, "hog", [{"name": "main", "image": "python", "command": hog,
                           "resources": {"limits": {"memory": "64Mi"}}}], restartPolicy="Never")
    assert wait_for(lambda: pod_phase(up, "hog") == "Failed")
    term = container_status(up, "hog", "main")["state"]["terminated"]
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)
    up.kubectl("delete", "pod", "hog")


def _cpu_seconds(pgid: int) -> float:
    ticks = sum(int(f[11]) + int(f[12]) for f in proc_stats().values() if int(f[2]) == pgid)
    return ticks / os.sysconf("SC_CLK_TCK")


@needs_cgroups
def test_cpu_limit_throttles_a_busy_container(up: ServerProcess) -> None:
    apply_pod(up, "spinner", [sh("main", "while :; do :; done", resources={"limits": {"cpu": "100m"}})])
    assert wait_for(lambda: pod_phase(up, "spinner") == "Running")
    pgid = int(container_status(up, "spinner", "main")["containerID"].removeprefix("kubelite://"))
    before, start = _cpu_seconds(pgid), time.monotonic()
    time.sleep(2)
    used = (_cpu_seconds(pgid) - before) / (time.monotonic() - start)
    assert used < 0.2, f"{used:.2f} CPU with a 100m limit"
    up.kubectl("delete", "pod", "spinner", "--grace-period=1")


def test_active_deadline_stops_the_pod_as_failed(up: ServerProcess) -> None:
    apply_pod(up, "deadline", [sh("main", "while true; do sleep 0.1; done")], activeDeadlineSeconds=2)
    assert wait_for(lambda: pod_phase(up, "deadline") == "Failed", 15)
    pod = get_pod(up, "deadline")
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert "terminated" in container_status(up, "deadline", "main")["state"]
    assert "DeadlineExceeded" in up.kubectl("get", "events", "--field-selector", "involvedObject.name=deadline").stdout
    up.kubectl("delete", "pod", "deadline")
