"""Every probe kind with every handler type, against real processes and a real endpoint (L10).

Pods use the host network, so probes aim at a small HTTP server this module runs on a loopback
port (a passing httpGet / tcpSocket) or at a port nothing listens on (a failing one); exec probes
run `true` / `false`. All pods are created at once and each case then checks its own pod.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import apply_pod, container_status, get_pod, sh, wait_for

pytestmark = pytest.mark.e2e

HANDLERS = ("exec", "httpGet", "tcpSocket")
# (case, probe kind, passes, what the pod shows)
CASES = [
    ("a passing readiness and liveness probe make the pod Ready without restarts", "readinessProbe", True,
     "ready"),
    ("a failing readiness probe keeps the pod unready but running", "readinessProbe", False, "unready"),
    ("a failing liveness probe restarts the container", "livenessProbe", False, "restarted"),
    ("a passing startup probe marks the container started", "startupProbe", True, "started"),
    ("a failing startup probe restarts the container", "startupProbe", False, "restarted"),
]


def _handler(kind: str, passes: bool, open_port: int, closed_port: int) -> dict[str, Any]:
    port = open_port if passes else closed_port
    return {"exec": {"exec": {"command": ["true" if passes else "false"]}},
            "httpGet": {"httpGet": {"path": "/", "port": port}},
            "tcpSocket": {"tcpSocket": {"port": port}}}[kind]


def _name(case: str, handler: str) -> str:
    return f"probe-{handler.lower()}-{CASES.index(next(c for c in CASES if c[0] == case))}"


@pytest.fixture(scope="module")
def probed(up: ServerProcess) -> Iterator[ServerProcess]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    open_port, closed_port = server.server_address[1], free_port()
    for case, kind, passes, _ in CASES:
        for handler in HANDLERS:
            probe = {**_handler(handler, passes, open_port, closed_port), "periodSeconds": 1, "failureThreshold": 1,
                     "terminationGracePeriodSeconds": 1}
            probes = {kind: probe}
            if kind == "readinessProbe" and passes:
                probes["livenessProbe"] = probe
            apply_pod(up, _name(case, handler), [sh("main", "while true; do sleep 0.1; done", **probes)],
                      terminationGracePeriodSeconds=1)
    yield up
    server.shutdown()
    up.kubectl("delete", "pods", "--all", "--grace-period=1")


def _ready(pod: dict[str, Any]) -> str:
    return next((c["status"] for c in pod.get("status", {}).get("conditions") or [] if c["type"] == "Ready"), "")


@pytest.mark.parametrize("handler", HANDLERS)
@pytest.mark.parametrize("case,kind,passes,shows", CASES, ids=[c[0] for c in CASES])
def test_probe(probed: ServerProcess, case: str, kind: str, passes: bool, shows: str, handler: str) -> None:
    name = _name(case, handler)
    if not passes:
        failed = f"{kind.removesuffix('Probe').capitalize()} probe failed"
        assert wait_for(lambda: failed in probed.kubectl("get", "events", "--field-selector",
                                                         f"involvedObject.name={name}").stdout)
    if shows == "restarted":
        assert wait_for(lambda: container_status(probed, name, "main").get("restartCount", 0) >= 1)
        return
    assert wait_for(lambda: get_pod(probed, name).get("status", {}).get("phase") == "Running")
    if shows == "ready":
        assert wait_for(lambda: _ready(get_pod(probed, name)) == "True")
    elif shows == "started":
        assert wait_for(lambda: container_status(probed, name, "main").get("started") is True)
    else:
        assert wait_for(lambda: container_status(probed, name, "main").get("ready") is False)
        assert _ready(get_pod(probed, name)) == "False"
    assert container_status(probed, name, "main")["restartCount"] == 0
