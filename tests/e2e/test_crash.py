"""Durability: every acknowledged write survives `kill -9` of the server mid-write (G2)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import start_server
from tests.e2e.writers import AcknowledgedCreates, create_pod, stored_pods

pytestmark = pytest.mark.e2e


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "home"
    server = start_server(data, home, insecure=True)
    with AcknowledgedCreates(server.port, 8) as load:
        time.sleep(1.5)
        server.proc.send_signal(signal.SIGKILL)  # while writes are in flight
        server.proc.wait(timeout=10)
    assert len(load.acked) > 50, "the load never got going"

    restarted = start_server(data, home, port=server.port, insecure=True)
    try:
        missing = load.missing(stored_pods(restarted.port))
        assert missing == [], f"{len(missing)} acknowledged writes lost"
        assert create_pod(restarted.port, "after-restart")  # the store is writable, not corrupt
    finally:
        restarted.stop()
