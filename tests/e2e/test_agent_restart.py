"""An agent killed with SIGKILL and restarted takes over from its checkpoint (L16), with real processes.

The control plane (`kubelite server`) keeps running; the agent is a separate `kubelite agent`
process that each test kills and starts again. Pods name their node, so no scheduler is involved.
A process counts as alive while /proc shows it in any state but zombie: this machine's init does
not reap orphans, so a container that ended while no agent was its parent stays a zombie.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import (
    AgentProcess,
    alive,
    apply_pod,
    container_status,
    get_pod,
    group_alive,
    pod_phase,
    server_and_agent,
    sh,
    wait_for,
)

pytestmark = pytest.mark.e2e
NODE = "restart-node"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, AgentProcess]]:
    with server_and_agent(tmp_path_factory.mktemp("restart"), NODE) as cluster:
        yield cluster


def shim_pid(c: ServerProcess, pod: str) -> int:
    return int(container_status(c, pod, "main")["containerID"].removeprefix("kubelite://"))


def on_node(c: ServerProcess, name: str, containers: list[dict[str, object]], **spec: object) -> None:
    apply_pod(c, name, containers, nodeName=NODE, **spec)


def run_then_kill_agent(server: ServerProcess, agent: AgentProcess, name: str, **spec: object) -> tuple[int, str]:
    """A looping pod on the node, Running; then the agent is killed. Returns its shim pid and the pod's uid."""
    on_node(server, name, [sh("main", "while true; do sleep 0.1; done")], **spec)
    assert wait_for(lambda: pod_phase(server, name) == "Running")
    pid, uid = shim_pid(server, name), get_pod(server, name)["metadata"]["uid"]
    agent.kill9()
    return pid, uid


def test_live_containers_are_re_adopted_with_their_logs(cluster: tuple[ServerProcess, AgentProcess],
                                                        tmp_path: Path) -> None:
    server, agent = cluster
    ready_probe = {"exec": {"command": ["sleep", "1"]}, "timeoutSeconds": 5, "periodSeconds": 30}
    on_node(server, "survivor", [sh("main", "trap 'exit 0' TERM; i=0; while true; do echo tick $i; i=$((i+1)); "
                                            "sleep 0.1; done", readinessProbe=ready_probe)])
    assert wait_for(lambda: container_status(server, "survivor", "main").get("ready") is True)
    pid = shim_pid(server, "survivor")
    agent.kill9()
    time.sleep(1.5)  # the container keeps running and writing while no agent reads its pipes
    assert group_alive(pid)
    agent.start()
    seen = set()
    for _ in range(10):  # the re-adopted container stays ready: no new initial delay, no reset to unready
        seen.add(container_status(server, "survivor", "main").get("ready"))
        time.sleep(0.25)
    assert seen == {True}
    assert wait_for(lambda: "tick" in server.kubectl("logs", "survivor", "--tail=1", check=False).stdout)
    before = int(server.kubectl("logs", "survivor", "--tail=1").stdout.split()[1])
    assert wait_for(lambda: int(server.kubectl("logs", "survivor", "--tail=1").stdout.split()[1]) > before + 5)
    ticks = [int(line.split()[1]) for line in server.kubectl("logs", "survivor").stdout.splitlines()]
    assert ticks == list(range(len(ticks)))  # nothing written while the agent was away is lost
    st = container_status(server, "survivor", "main")
    assert st["restartCount"] == 0 and "running" in st["state"] and shim_pid(server, "survivor") == pid
    server.kubectl("delete", "pod", "survivor")
    assert not group_alive(pid)


@pytest.mark.parametrize("policy,phase,restarts", [("Never", "Failed", 0), ("OnFailure", "Running", 1)])
def test_exit_while_the_agent_is_down_is_reported_with_its_code(cluster: tuple[ServerProcess, AgentProcess],
                                                                policy: str, phase: str, restarts: int) -> None:
    server, agent = cluster
    name = f"exits-{policy.lower()}"
    on_node(server, name, [sh("main", "test -e /tmp/$(POD) && exec sleep 30; touch /tmp/$(POD); sleep 1; exit 3",
                              env=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}])],
            restartPolicy=policy)
    assert wait_for(lambda: pod_phase(server, name) == "Running")
    pid = shim_pid(server, name)
    agent.kill9()
    assert wait_for(lambda: not group_alive(pid), 5)
    ended = time.time()
    time.sleep(3)
    agent.start()
    assert wait_for(lambda: container_status(server, name, "main").get("restartCount") == restarts and
                    pod_phase(server, name) == phase)
    st = container_status(server, name, "main")
    terminated = st["state"].get("terminated") or st["lastState"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    # issue 10 item 6: finishedAt is when it ended (the shim's record), not when the new agent noticed
    finished = datetime.fromisoformat(terminated["finishedAt"].replace("Z", "+00:00")).timestamp()
    assert finished <= ended + 1, (terminated["finishedAt"], ended)
    server.kubectl("delete", "pod", name, "--grace-period=1")


def test_termination_restarts_with_the_full_grace_period(cluster: tuple[ServerProcess, AgentProcess],
                                                        tmp_path: Path) -> None:
    """A restarted agent gives a terminating pod the full grace again, from its own stop signal.

    The container notes when each stop signal arrives and otherwise ignores it. The grace window is
    measured from the restarted agent's stop signal (second note) to the group's death, so the agent's
    start-up time under load does not count; an agent that kept the first agent's deadline would kill
    it after at most 6 - 1 s (the time before the kill) - its start-up time, well under 5 s.
    """
    server, agent = cluster
    notes = tmp_path / "stop-signals"
    on_node(server, "stubborn", [sh("main", f"trap 'date +%s.%N >>{notes}' TERM; while true; do sleep 0.1; done")],
            terminationGracePeriodSeconds=6)
    assert wait_for(lambda: pod_phase(server, "stubborn") == "Running")
    pid = shim_pid(server, "stubborn")
    server.kubectl("delete", "pod", "stubborn", "--wait=false")
    assert wait_for(lambda: notes.exists())  # the first agent's stop signal
    time.sleep(1)
    agent.kill9()
    assert group_alive(pid)  # the stop signal does not end it; only the agent's SIGKILL at the deadline does
    restarted = time.monotonic()
    agent.start()
    assert wait_for(lambda: len(notes.read_text().split()) == 2, 30)  # the restarted agent's stop signal
    assert wait_for(lambda: not group_alive(pid), 30)
    killed, took = time.time(), time.monotonic() - restarted
    window = killed - float(notes.read_text().split()[1])
    assert took >= 6, took  # load only makes this longer
    # the window's margins: the note may be written up to a sleep late (shorter), the death is seen up to
    # a poll late and the agent's timer may fire late under load (longer)
    assert 6 - 1 <= window <= 6 + 2.5, window
    assert wait_for(lambda: get_pod(server, "stubborn") == {}, 30)


def test_pod_deleted_while_the_agent_is_down_has_its_processes_stopped(
        cluster: tuple[ServerProcess, AgentProcess]) -> None:
    server, agent = cluster
    pid, uid = run_then_kill_agent(server, agent, "forgotten")
    server.kubectl("delete", "pod", "forgotten", "--force", "--grace-period=0")
    assert group_alive(pid)
    agent.start()
    assert wait_for(lambda: not group_alive(pid), 10)
    assert not list(agent.data_dir.glob(f"pods/*_{uid}/checkpoint.json"))


def test_a_reused_pid_is_never_adopted(cluster: tuple[ServerProcess, AgentProcess]) -> None:
    """The checkpoint names a process by pid and kernel start time: another process with that pid is left alone."""
    server, agent = cluster
    _, uid = run_then_kill_agent(server, agent, "replaced", restartPolicy="Never")
    [path] = agent.data_dir.glob(f"pods/*_{uid}/checkpoint.json")
    saved = json.loads(path.read_text())
    old = saved["containers"]["main"]["process"]["pid"]
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    saved["containers"]["main"]["process"]["pid"] = bystander.pid  # as if the pid had been reused
    path.write_text(json.dumps(saved))
    try:
        agent.start()
        assert wait_for(lambda: pod_phase(server, "replaced") == "Failed")
        assert container_status(server, "replaced", "main")["state"]["terminated"]["exitCode"] == 137
        server.kubectl("delete", "pod", "replaced")
        assert alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()
        os.killpg(old, signal.SIGKILL)


def test_a_container_spawned_just_before_the_kill_is_found(cluster: tuple[ServerProcess, AgentProcess]) -> None:
    """The checkpoint names the instance before it is spawned; if the agent dies before recording the pid,
    the restarted agent finds the process by the log path it was started for."""
    server, agent = cluster
    pid, uid = run_then_kill_agent(server, agent, "unrecorded")
    [path] = agent.data_dir.glob(f"pods/*_{uid}/checkpoint.json")
    saved = json.loads(path.read_text())
    entry = saved["containers"]["main"]
    entry["starting"] = entry["process"]["state"] + ".log"  # as if killed between the spawn and the record
    entry["process"] = None
    path.write_text(json.dumps(saved))
    agent.start()
    assert wait_for(lambda: json.loads(path.read_text())["containers"]["main"]["process"] is not None)
    assert json.loads(path.read_text())["containers"]["main"]["process"]["pid"] == pid  # not a new instance
    assert shim_pid(server, "unrecorded") == pid and group_alive(pid)
    assert container_status(server, "unrecorded", "main")["restartCount"] == 0
    server.kubectl("delete", "pod", "unrecorded", "--grace-period=1")
    assert not group_alive(pid)
