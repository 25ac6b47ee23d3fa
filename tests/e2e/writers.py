"""Writers creating pods as fast as a `kubelite server` acknowledges them, for the durability checks: every
create acknowledged (201) must be in the store afterwards, whatever was killed meanwhile — the server
(tests/e2e/test_crash.py, benchmarks/durability.py) or an etcd member (tests/e2e/test_etcd_member_failure.py).

Plain threads and urllib, not the asyncio client: the writes must keep going while the test's own thread
blocks (sleeps, kills, waits for a process).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from types import TracebackType

PODS = "/api/v1/namespaces/default/pods"
RETRY_PAUSE = 0.05  # after a failed create: the server is down, no need to spin until it is back


def create_pod(port: int, name: str) -> bool:
    """Whether the server on `port` acknowledged (201) creating pod `name`; any failure is False."""
    body = json.dumps({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{PODS}", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return bool(resp.status == 201)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def stored_pods(port: int, timeout: float = 10) -> set[str]:
    """The names of the pods the server on `port` lists."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{PODS}", timeout=timeout) as resp:
        return {p["metadata"]["name"] for p in json.load(resp)["items"]}


class AcknowledgedCreates:
    """`writers` threads creating pods `w<writer>-<i>` on the server at `port` until stopped (leaving the `with`
    block), each acknowledged name recorded with when (time.monotonic). A failed create is not retried under its
    name — the server may have stored it before failing — the next create takes a new one."""

    def __init__(self, port: int, writers: int) -> None:
        self.port = port
        self.acked: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(w,)) for w in range(writers)]

    def __enter__(self) -> AcknowledgedCreates:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join()

    def _write(self, writer: int) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"w{writer}-{i}"
            if create_pod(self.port, name):
                with self._lock:
                    self.acked.append((time.monotonic(), name))
            else:
                time.sleep(RETRY_PAUSE)
            i += 1

    def count(self, after: float = float("-inf"), before: float = float("inf")) -> int:
        """How many creates were acknowledged in (after, before)."""
        return sum(1 for at, _ in self.acked if after < at < before)

    def missing(self, stored: set[str]) -> list[str]:
        """The acknowledged names not in `stored`: lost writes."""
        return [name for _, name in self.acked if name not in stored]
