"""Shared fixtures: an in-process API server over real HTTP, and a real `kubelite server` process."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth.config import AuthConfig
from kubelite.apiserver.event_ttl import DEFAULT_EVENT_TTL
from kubelite.clock import Clock, RealClock
from kubelite.store.interface import Store
from kubelite.store.sqlite import SQLiteStore


@contextlib.asynccontextmanager
async def running(store: Store, tokens: frozenset[str] = frozenset(), auth: AuthConfig | None = None,
                  clock: Clock | None = None, event_ttl: int = DEFAULT_EVENT_TTL) -> AsyncIterator[ApiServer]:
    """A real ApiServer on `store`, started (for in-process clients: no HTTP); the store is closed after it."""
    try:
        server = ApiServer(store, clock or RealClock(), tokens, auth=auth or AuthConfig(), event_ttl=event_ttl)
        await server.start()
        try:
            yield server
        finally:
            await server.stop()
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def serving_server(store: Store, tokens: frozenset[str] = frozenset(), auth: AuthConfig | None = None,
                         clock: Clock | None = None, event_ttl: int = DEFAULT_EVENT_TTL,
                         ) -> AsyncIterator[tuple[ApiServer, TestClient]]:  # type: ignore[type-arg]
    """A real ApiServer on `store`, reached over HTTP on a loopback port, and the server itself (for tests that
    also reach its registry or store); the store is closed after it."""
    async with running(store, tokens, auth, clock, event_ttl) as server:
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        try:
            yield server, client
        finally:
            await client.close()


@contextlib.asynccontextmanager
async def serving(store: Store, tokens: frozenset[str] = frozenset(), auth: AuthConfig | None = None,
                  clock: Clock | None = None) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    """A real ApiServer on `store`, reached over HTTP on a loopback port; the store is closed after it."""
    async with serving_server(store, tokens, auth, clock) as (_, client):
        yield client


@pytest.fixture
async def inprocess_server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """A real ApiServer on a real SQLite file, for in-process clients (no HTTP)."""
    async with running(await SQLiteStore.open(tmp_path / "state.db")) as srv:
        yield srv


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    """A real ApiServer on a real SQLite file, reached over HTTP on a loopback port."""
    async with serving(await SQLiteStore.open(tmp_path / "state.db")) as client:
        yield client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    """One `api` for a whole module, for tables of cases that write nothing (each is refused before the store)
    or only objects no other case reads: starting a server per case was most of such a table's time. Its
    tests run on the module's event loop: mark them `@SHARED_LOOP`."""
    async with serving(await SQLiteStore.open(tmp_path_factory.mktemp("api") / "state.db")) as client:
        yield client


SHARED_LOOP = pytest.mark.asyncio(loop_scope="module")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    data_dir: Path
    port: int
    proc: subprocess.Popen[bytes]
    home: Path

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}
        res = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=timeout,
                             input=stdin)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    def stop(self, sig: int = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)


def start_server(data_dir: Path, home: Path, port: int | None = None, insecure: bool = False,
                 extra: list[str] | None = None) -> ServerProcess:
    port = port or free_port()
    args = [sys.executable, "-m", "kubelite.cli.main", "server", "--data-dir", str(data_dir), "--port", str(port),
            *(extra or [])]
    if insecure:
        args.append("--insecure")
    # Output to a file, never an undrained pipe: once 64 KiB of log lines (a controller's routine
    # conflict warnings in a long benchmark) filled the pipe, the server blocked in write() with its
    # event loop, SIGTERM included, and stop() timed out.
    log_path = data_dir.parent / f"server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text(errors='replace')}")
        if (data_dir / "kubeconfig").exists():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                pass
        time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("server did not start")
    home.mkdir(parents=True, exist_ok=True)
    return ServerProcess(data_dir, port, proc, home)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `kubelite server` (HTTPS + token) shared by one test module, without the scheduler so that
    API-level tests see only their own writes (tests/e2e/test_scheduler.py runs one with it)."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is required for the end-to-end tests")
    base = tmp_path_factory.mktemp("server")
    proc = start_server(base / "data", base / "home", extra=["--disable", "scheduler"])
    yield proc
    proc.stop()
