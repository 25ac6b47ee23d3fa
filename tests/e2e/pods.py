"""Helpers for driving pods through kubectl in the agent's end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tests.conftest import ServerProcess, start_server

# Seconds a fixture's agents give their pods when stopped (`--shutdown-grace-period`, as `kubelite up`'s):
# by default an agent leaves them running for the next one, and a test's pods would outlive the test.
SHUTDOWN_GRACE = 5


def apply_pod(c: ServerProcess, name: str, containers: list[dict[str, Any]], **spec: Any) -> None:
    c.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers, **spec}}))


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def get_pod(c: ServerProcess, name: str) -> dict[str, Any]:
    res = c.kubectl("get", "pod", name, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def wait_for(predicate: Callable[[], bool], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def pod_phase(c: ServerProcess, name: str) -> str:
    return str(get_pod(c, name).get("status", {}).get("phase", ""))


def container_status(c: ServerProcess, name: str, container: str) -> dict[str, Any]:
    st = get_pod(c, name).get("status", {})
    for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or []):
        if cs["name"] == container:
            return dict(cs)
    return {}


def proc_stats() -> dict[int, list[str]]:
    """/proc/PID/stat fields after the command name, for every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = stat[stat.rindex(")") + 2:].split()
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def group_alive(pgid: int) -> bool:
    """Any non-zombie process in the process group `pgid`."""
    return any(f[0] != "Z" and int(f[2]) == pgid for f in proc_stats().values())


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # exited between the scan and now
        return b""


def processes_under(base: Path) -> dict[int, str]:
    """Live processes of a test's cluster under `base`: those whose command line names it (server, agents,
    container shims: their paths are in it) and every process in a group one of them leads (a container runs
    in its shim's session; its own processes, `sleep 60`, name nothing). This process and its group are never
    included, whatever its own command line says (`--basetemp`)."""
    stats = proc_stats()
    me, my_group = os.getpid(), os.getpgid(0)
    marker = os.path.join(base, "").encode()  # base/: not base1 when base is …/join1 and a sibling …/join10
    marked = {pid for pid, f in stats.items() if f[0] != "Z" and marker in _cmdline(pid)} - {me}
    groups = {pid for pid in marked if int(stats[pid][2]) == pid} - {my_group}
    return {pid: _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")[:200]
            for pid, f in stats.items()
            if f[0] != "Z" and pid != me and (pid in marked or int(f[2]) in groups)}


def kill_leftovers(base: Path, timeout: float = 10) -> list[str]:
    """Wait up to `timeout` for the processes under `base` to end, SIGKILL those still running (one test's leak
    must not load the machine for the tests after it) and return their command lines."""
    wait_for(lambda: not processes_under(base), timeout)
    leaked = processes_under(base)
    for pid in leaked:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return sorted(leaked.values())


@contextmanager
def no_leftovers(base: Path, timeout: float = 10) -> Iterator[None]:
    """Around a fixture's cluster under `base`: on the way out every process it started must have ended (the
    agents stop their pods: `--shutdown-grace-period`); those still running are killed and fail the block."""
    try:
        yield
    except BaseException:
        kill_leftovers(base, timeout)
        raise
    leaked = kill_leftovers(base, timeout)
    assert leaked == [], f"{len(leaked)} processes outlived the cluster under {base}:\n" + "\n".join(leaked)


def short_lease_config(path: Path, lease_seconds: int) -> Path:
    """A KubeletConfiguration at `path` whose node Lease lasts `lease_seconds` (renewed every quarter of it), for
    tests that wait for renewals or for a node's grace period: kubelite's 40 s default renews every 10 s."""
    path.write_text(f"kind: KubeletConfiguration\nnodeLeaseDurationSeconds: {lease_seconds}\n")
    return path


def agent_pid(up_pid: int) -> int:
    """The `kubelite agent` child process of `kubelite up`."""
    for pid, fields in proc_stats().items():
        if int(fields[1]) != up_pid:
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:  # exited between the scan and now
            continue
        if b"agent" in argv:
            return pid
    raise LookupError(f"no agent process under {up_pid}")


class AgentProcess:
    """A `kubelite agent` process for node `node`, as a user starts one beside `kubelite server`, except that
    it stops its pods when stopped (`--shutdown-grace-period`, as `kubelite up`'s): by default they keep
    running for the next agent, and a test's would outlive it. A `kill9` leaves them, as a crash does."""

    def __init__(self, server: ServerProcess, data_dir: Path, node: str, extra: Sequence[str] = ()) -> None:
        self.server, self.data_dir, self.node, self.extra = server, data_dir, node, list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the agent; its log goes to <data dir>.log (kept across restarts, for post-mortems)."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with self.data_dir.with_suffix(".log").open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig",
                                          str(self.server.kubeconfig), "--node-name", self.node, "--data-dir",
                                          str(self.data_dir), "--shutdown-grace-period", str(SHUTDOWN_GRACE),
                                          *self.extra],
                                         stdout=subprocess.DEVNULL, stderr=log)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


@contextmanager
def server_and_agent(base: Path, node: str) -> Iterator[tuple[ServerProcess, AgentProcess]]:
    """`kubelite server` without the scheduler (pods name their node) and a `kubelite agent` for `node`."""
    with no_leftovers(base):
        server = start_server(base / "server", base / "home", extra=["--disable", "scheduler"])
        agent = AgentProcess(server, base / "agent", node)
        agent.start()
        try:
            assert wait_for(lambda: node in server.kubectl("get", "nodes", check=False).stdout)
            yield server, agent
        finally:
            agent.stop()
            server.stop()
