"""Fixtures shared by the unit tests."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest


class _Status500(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server_port() -> Iterator[int]:
    """The port of an HTTP server on loopback that answers every GET with 500: for probe and hook failure texts."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
