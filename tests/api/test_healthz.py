"""/healthz, /livez and /readyz: upstream's healthz_test.go table (testMultipleChecks) on the handler, the
standard checks on a real server over SQLite, and a real etcd stopped (SIGSTOP) under a running server."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, make_mocked_request

from kubelite.apiserver import healthz
from kubelite.apiserver.healthz import Check, CheckFailed, Health, LogFlusher
from kubelite.clock import FakeClock
from kubelite.store.etcd import EtcdStore, parse_url
from kubelite.store.interface import KeyValue, Store, Unavailable, WrappedStore
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import serving
from tests.etcd_cluster import EtcdCluster


async def _bad() -> None:
    raise CheckFailed("this will fail")


# testMultipleChecks: (case, query or sub-path, expected body ({name}: the root's), status, with the "bad" check)
MULTIPLE_CHECKS = [
    ("verbose", "?verbose", "[+]ping ok\n{name} check passed\n", 200, False),
    ("exclude_unknown", "?exclude=dontexist", "ok", 200, False),
    ("exclude_bad", "?exclude=bad", "ok", 200, True),
    ("verbose_exclude_bad", "?verbose=true&exclude=bad", "[+]ping ok\n[+]bad excluded: ok\n{name} check passed\n",
     200, True),
    ("verbose_exclude_unknown", "?verbose=true&exclude=dontexist",
     '[+]ping ok\nwarn: some health checks cannot be excluded: no matches for "dontexist"\n{name} check passed\n',
     200, False),
    ("ping_path", "/ping", "ok", 200, False),
    ("root", "", "ok", 200, False),
    ("verbose_bad", "?verbose", "[+]ping ok\n[-]bad failed: reason withheld\n{name} check failed\n", 500, True),
    ("ping_path_beside_bad", "/ping", "ok", 200, True),
    ("bad_path_tells_reason", "/bad", "internal server error: this will fail\n", 500, True),
    ("root_bad", "", "[+]ping ok\n[-]bad failed: reason withheld\n{name} check failed\n", 500, True),
]


@pytest.mark.parametrize("root", ["healthz", "readyz"])  # TestMultipleChecks, TestMultiplePathChecks
@pytest.mark.parametrize(("case", "suffix", "body", "status", "bad"), MULTIPLE_CHECKS,
                         ids=[c[0] for c in MULTIPLE_CHECKS])
async def test_multiple_checks(root: str, case: str, suffix: str, body: str, status: int, bad: bool) -> None:
    checks = (Check("ping", healthz.ping), *((Check("bad", _bad),) if bad else ()))
    health = Health({root: checks})
    url = f"/{root}{suffix}"
    resp = await health.serve(make_mocked_request("GET", url), url.split("?")[0])
    assert resp is not None
    assert (resp.status, resp.text, resp.content_type, resp.charset) == (
        status, body.format(name=root), "text/plain", "utf-8"), case


@pytest.mark.parametrize(("case", "path"), [
    ("unknown_check", "/readyz/nothing"),
    ("too_deep", "/readyz/ping/more"),
    ("other_root", "/healthzz"),
])
async def test_paths_that_are_no_check_are_not_served(case: str, path: str) -> None:
    health = Health({"readyz": (Check("ping", healthz.ping),)})
    assert await health.serve(make_mocked_request("GET", path), path) is None, case


async def test_log_check_fails_when_a_flush_blocks_longer_than_the_max_delay() -> None:
    clock = FakeClock()
    release = threading.Event()

    class Blocking(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None: ...

        def flush(self) -> None:
            release.wait(10)

    blocking = Blocking()
    flusher = LogFlusher(clock, interval=0.01, max_delay=healthz.LOG_MAX_DELAY)
    logging.getLogger().addHandler(blocking)
    try:
        await flusher.check()  # starts the flushing thread, which now blocks
        await clock.advance(healthz.LOG_MAX_DELAY + 1)
        with pytest.raises(CheckFailed, match="logging blocked"):
            await flusher.check()
        release.set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the thread finishes its flush and notes the time
            try:
                await flusher.check()
                break
            except CheckFailed:
                await asyncio.sleep(0.01)
        await flusher.check()
    finally:
        release.set()
        flusher.stop()
        logging.getLogger().removeHandler(blocking)


READYZ_VERBOSE = ("[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]informer-sync ok\n[+]shutdown ok\n"
                  "readyz check passed\n")


@pytest.mark.parametrize(("case", "path", "body"), [
    ("readyz_verbose_lists_every_check", "/readyz?verbose", READYZ_VERBOSE),
    ("livez_verbose_lists_every_check", "/livez?verbose", "[+]ping ok\n[+]log ok\n[+]etcd ok\nlivez check passed\n"),
    ("healthz_plain", "/healthz", "ok"),
    ("readyz_etcd_path_on_sqlite", "/readyz/etcd", "ok"),
    ("livez_ping_path", "/livez/ping", "ok"),
    ("trailing_slash", "/readyz/", "ok"),
])
async def test_standard_checks_on_sqlite(api: TestClient, case: str, path: str,  # type: ignore[type-arg]
                                         body: str) -> None:
    resp = await api.get(path)
    assert (resp.status, await resp.text()) == (200, body), case


async def _until(probe: Callable[[], Awaitable[bool]], within: float) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        assert time.monotonic() < deadline, "the condition did not come"
        await asyncio.sleep(0.1)


async def test_stopped_etcd_fails_the_etcd_checks_with_the_reason_withheld(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cluster = EtcdCluster(tmp_path, 1)
    cluster.start()
    proc = cluster.procs[0]
    assert proc is not None
    try:
        async with serving(await EtcdStore.open(parse_url(cluster.url))) as api:
            assert (await api.get("/readyz")).status == 200
            proc.send_signal(signal.SIGSTOP)
            try:
                async def failing() -> bool:
                    return (await api.get("/readyz")).status == 500

                started = time.monotonic()
                await _until(failing, healthz.PROBE_INTERVAL + healthz.PROBE_TIMEOUT + 3)
                elapsed = time.monotonic() - started
                assert elapsed < healthz.PROBE_INTERVAL + healthz.PROBE_TIMEOUT + 2  # time-bounded, not RETRY_FOR
                readyz = await api.get("/readyz?verbose")
                assert (readyz.status, await readyz.text()) == (500, (
                    "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason "
                    "withheld\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check failed\n"))
                livez = await api.get("/livez")
                assert (livez.status, await livez.text()) == (500, (
                    "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nlivez check failed\n"))
                excluded = await api.get("/livez?exclude=etcd")
                assert (excluded.status, await excluded.text()) == (200, "ok")
                assert (await api.get("/livez/ping")).status == 200
                single = await api.get("/readyz/etcd")
                assert single.status == 500
                assert (await single.text()).startswith("internal server error: etcd: DEADLINE_EXCEEDED")
            finally:
                proc.send_signal(signal.SIGCONT)

            async def passing() -> bool:
                return (await api.get("/readyz")).status == 200

            await _until(passing, healthz.PROBE_INTERVAL + healthz.PROBE_TIMEOUT + 3)
    finally:
        cluster.stop()
    probes = [r for r in caplog.records if r.name == "kubelite.apiserver.healthz" and "probe failed" in r.message]
    assert probes and all(r.exc_info is None and "DEADLINE_EXCEEDED" in r.message for r in probes)


class UnavailableWrites(WrappedStore):
    """A real store whose ConfigMap creates fail as an unreachable etcd's do (after the etcd store's retries)."""

    async def create(self, key: str, value: bytes) -> KeyValue:
        if "/configmaps/" in key:
            raise Unavailable("etcd unavailable: failed to connect to all addresses")
        return await self.inner.create(key, value)


async def test_store_unavailable_is_a_500_logged_as_one_line(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    store: Store = UnavailableWrites(await SQLiteStore.open(tmp_path / "state.db"))
    async with serving(store) as api:
        caplog.clear()
        resp = await api.post("/api/v1/namespaces/default/configmaps",
                              json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        assert (resp.status, (await resp.json())["reason"]) == (500, "InternalError")
    errors = [r for r in caplog.records if r.name == "kubelite.apiserver" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None and "store unavailable" in errors[0].message
