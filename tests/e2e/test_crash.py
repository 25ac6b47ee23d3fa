"""Durability: every acknowledged write survives `kill -9` of the server mid-write (G2)."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import start_server

pytestmark = pytest.mark.e2e


def _create(port: int, name: str) -> bool:
    body = json.dumps({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/namespaces/default/pods", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return bool(resp.status == 201)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "home"
    server = start_server(data, home, insecure=True)
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(worker: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"w{worker}-{i}"
            if _create(server.port, name):
                with lock:
                    acked.append(name)
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    server.proc.send_signal(signal.SIGKILL)  # while writes are in flight
    server.proc.wait(timeout=10)
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) > 50, "the load never got going"

    restarted = start_server(data, home, port=server.port, insecure=True)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{restarted.port}/api/v1/namespaces/default/pods",
                                    timeout=10) as resp:
            stored = {p["metadata"]["name"] for p in json.load(resp)["items"]}
        missing = [n for n in acked if n not in stored]
        assert missing == [], f"{len(missing)} acknowledged writes lost"
        assert _create(restarted.port, "after-restart")  # the store is writable, not corrupt
    finally:
        restarted.stop()
