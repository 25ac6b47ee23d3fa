"""The `up` fixture: a real `kubelite up` (control plane + supervised node agent) per test module."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess, free_port

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
    base = tmp_path_factory.mktemp("up")
    (base / "node.yaml").write_text(NODE_CONFIG)
    port = free_port()
    data = base / "data"
    proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(data), "--port",
                             str(port), "--node-config", str(base / "node.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    server = ServerProcess(data, port, proc, base / "home")
    (base / "home").mkdir()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (data / "kubeconfig").exists() and server.kubectl("get", "nodes", check=False).stdout.count("Ready"):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("kubelite up did not become ready")
    yield server
    server.stop()
