"""The `up` fixture: a real `kubelite up` (control plane + supervised node agent) per test module."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import no_leftovers

NODE_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
crashLoopBackOff:
  maxContainerRestartPeriod: 2s
imageCatalog:
  example.com/echo:1: ["sh", "-c", "echo from-catalog; sleep 30"]
"""


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`kubelite up` for a test module; on the way out every process it started (server, agent, containers) must
    have ended (no_leftovers: `up`'s agent stops its pods when `up` stops)."""
    base = tmp_path_factory.mktemp("up")
    (base / "node.yaml").write_text(NODE_CONFIG)
    port = free_port()
    data = base / "data"
    with no_leftovers(base):
        # Output to a file, never an undrained pipe (see tests/conftest.py start_server).
        with (base / "up.log").open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(data),
                                     "--port", str(port), "--node-config", str(base / "node.yaml")],
                                    stdout=log, stderr=subprocess.STDOUT)
        server = ServerProcess(data, port, proc, base / "home")
        (base / "home").mkdir()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if (data / "kubeconfig").exists() and server.kubectl("get", "nodes", check=False).stdout.count(
                        "Ready"):
                    break
                time.sleep(0.2)
            else:
                raise RuntimeError(f"kubelite up did not become ready: {(base / 'up.log').read_text()[-4000:]}")
            yield server
        finally:
            server.stop()
