"""Ctrl-C on `kubelite up` / `kubelite server`: a clean shutdown, no asyncio traceback, no process left behind.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group (the node agent child of
`up` included), so the tests start kubelite in its own session and signal the group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.e2e


def _running_with(marker: str) -> list[int]:
    """PIDs of live processes whose command line mentions `marker` (the test's own data dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry.name))
    return pids


def _catches_sigint(pid: int) -> bool:
    """Whether the process has a SIGINT handler yet (the kernel's SigCgt mask), i.e. Python's start-up installed one."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def _wait_ready(command: str, data: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until the server wrote its kubeconfig and, under `up`, the node agent child is running."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "kubelite exited before it was signalled"
        agent_up = command != "up" or any(pid != proc.pid for pid in _running_with(str(data / "agent")))
        if (data / "kubeconfig").exists() and agent_up:
            time.sleep(1.0)  # let the components start their loops
            return
        time.sleep(0.1)
    raise AssertionError(f"kubelite {command} did not become ready")


@pytest.mark.parametrize(("command", "when"), [
    pytest.param("up", "running", id="Ctrl-C on a running kubelite up"),
    pytest.param("server", "running", id="Ctrl-C on a running kubelite server"),
    pytest.param("up", "starting", id="Ctrl-C while kubelite up starts"),
    pytest.param("server", "starting", id="Ctrl-C while kubelite server starts"),
])
def test_ctrl_c_shuts_down_cleanly(tmp_path: Path, command: str, when: str) -> None:
    data = tmp_path / "data"
    # A terminal's foreground job has SIGINT's default action; a suite started in the background (`pytest &` from
    # a script) has it ignored, which its children inherit, and Ctrl-C while starting would then go unheard.
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", command, "--data-dir", str(data),
                             "--port", str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        if when == "running":
            _wait_ready(command, data, proc)
        else:
            # Until the interpreter installs its handler, SIGINT's default action kills it outright (as a
            # terminal's Ctrl-C would, and a loaded machine can take longer than any fixed sleep to get there);
            # the case is about kubelite's own start-up, so it waits for the handler and then for imports to run.
            deadline = time.monotonic() + 30
            while not _catches_sigint(proc.pid):
                assert proc.poll() is None and time.monotonic() < deadline, "python never installed a SIGINT handler"
                time.sleep(0.005)
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stderr = err.decode()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode in (0, 130), (proc.returncode, stderr)
    deadline = time.monotonic() + 10
    while _running_with(str(data)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running_with(str(data)) == []
