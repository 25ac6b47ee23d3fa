"""Schema-driven API fuzzing against a real API server on a real SQLite store (issue 10).

Objects are drawn from the OpenAPI v3 schemas the server itself serves, with a share of their fields replaced
by arbitrary JSON (type confusion), and sent as creates, updates, patches of every kind and deletes, in JSON
and YAML. The oracle: no response is 5xx, none takes over a second (twice: see `Harness.send`), `/readyz`
answers within 100 ms after every 500 requests and after the run, and every object read through the API
equals what the store holds and decodes against its own schema.

The server runs on its own event loop in its own thread, and a second thread probes `/readyz` every 20 ms
over its own connection while the fuzzer sends: the probe's worst latency is what any other client would
have waited behind the slowest fuzz request ("no request stalls the server over 1 s"), printed at the end
and bounded (PROBE_BOUND: 1 s in a campaign, looser for the short CI sample on a loaded shared machine).
"""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from kubelite.apiserver import discovery, openapi, typecheck
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.cache import decode
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.registry.base import Resource
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore
from tests.fuzz.strategies import from_schema, json_values, names

TYPED = [r for r in RESOURCES if r.model and "list" in r.verbs]  # stored kinds (selfsubjectreviews: create only)
VERBS = ["create", "create-yaml", "update", "merge-patch", "strategic-patch", "json-patch", "apply", "delete",
         "status"]
T = TypeVar("T")
STALL = 1.0
GROUP = 500
READY_WITHIN = 0.1
PROBE_EVERY = 0.02
# The worst `/readyz` latency the probe may see: the aim (1 s) in a campaign; the CI sample runs on a shared
# 2-core machine under parallel test runs, where the whole VM pauses for a second now and then by itself.
PROBE_BOUND = STALL if os.environ.get("KUBELITE_FUZZ") == "campaign" else 3.0


class Probe(threading.Thread):
    """GET /readyz every PROBE_EVERY seconds on its own connection, recording each latency.

    It also times the cyclic garbage collector's pauses, which stop every thread of the process: a probe
    that waited as long as a collection did was held up by the collector, not by a request."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.latencies: list[float] = []
        self.halt = threading.Event()
        self.gc_pauses: list[float] = []
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif info.get("generation") == 2:
            self.gc_pauses.append(time.perf_counter() - self._gc_started)

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.halt.wait(PROBE_EVERY):
            started = time.perf_counter()
            conn.request("GET", "/readyz")
            conn.getresponse().read()
            self.latencies.append(time.perf_counter() - started)
        conn.close()

    def summary(self) -> str:
        ordered = sorted(self.latencies) or [0.0]
        p99 = ordered[int(len(ordered) * 0.99)]
        over = sum(1 for x in ordered if x >= STALL)
        return (f"readyz probe: {len(self.latencies)} probes, p99 {p99 * 1000:.0f} ms, "
                f"max {ordered[-1] * 1000:.0f} ms, {over} over {STALL:.0f} s; {len(self.gc_pauses)} full "
                f"collections, longest {max(self.gc_pauses, default=0.0) * 1000:.0f} ms")


@dataclass
class Harness:
    """An ApiServer over HTTP on its own event loop and thread, driven synchronously by Hypothesis."""

    loop: asyncio.AbstractEventLoop
    store: SQLiteStore
    server: ApiServer
    client: TestClient  # type: ignore[type-arg]
    probe: Probe
    statuses: Counter[int] = field(default_factory=Counter)
    slowest: float = 0.0
    passing_stalls: list[str] = field(default_factory=list)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def send(self, method: str, path: str, body: bytes | None, ctype: str = "application/json") -> tuple[int, Any]:
        status, payload, elapsed = self._timed(method, path, body, ctype)
        self.statuses[status] += 1
        assert status < 500, (method, path, payload[:2000])
        if elapsed >= STALL:
            # A request whose own cost stalls the server stalls again when replayed; one that does not was held up
            # by the machine (a shared VM: fsync, other processes) and is counted, not failed.
            _, _, again = self._timed(method, path, body, ctype)
            assert again < STALL, (method, path, elapsed, again)
            self.passing_stalls.append(f"{method} {path}: {elapsed:.2f} s, replayed in {again:.3f} s")
        return status, payload

    def _timed(self, method: str, path: str, body: bytes | None, ctype: str) -> tuple[int, bytes, float]:
        async def go() -> tuple[int, bytes]:
            resp = await self.client.request(method, path, data=body, headers={"Content-Type": ctype})
            return resp.status, await resp.read()

        started = time.perf_counter()
        status, payload = self.run(go())
        elapsed = time.perf_counter() - started
        self.slowest = max(self.slowest, elapsed)
        return status, payload, elapsed


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    path: Path = tmp_path_factory.mktemp("fuzz") / "state.db"

    async def start() -> tuple[SQLiteStore, ApiServer, TestClient]:  # type: ignore[type-arg]
        store = await SQLiteStore.open(path)
        server = ApiServer(store, RealClock())
        await server.start()
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        return store, server, client

    store, server, client = asyncio.run_coroutine_threadsafe(start(), loop).result()
    probe = Probe(client.port)
    probe.start()
    h = Harness(loop, store, server, client, probe)
    yield h
    probe.halt.set()
    probe.join()
    gc.callbacks.remove(probe._gc)

    async def stop() -> None:
        await h.client.close()
        await h.server.stop()
        await h.store.close()

    h.run(stop())
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def _dumps(value: Any) -> bytes:
    """JSON with integers beyond 64 bits too (orjson refuses to write them; clients may send them)."""
    return json.dumps(value).encode()


def _schemas(r: Resource) -> dict[str, Any]:
    doc = discovery.openapi_document("api/v1" if r.group_version == "v1" else f"apis/{r.group_version}")
    assert doc is not None
    schemas: dict[str, Any] = doc["components"]["schemas"]
    return schemas


def _base(r: Resource) -> str:
    prefix = "/api/v1" if r.group_version == "v1" else f"/apis/{r.group_version}"
    return prefix + ("/namespaces/default/" if r.namespaced else "/") + r.plural


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes, str]:
    r = draw(st.sampled_from(TYPED))
    schemas = _schemas(r)
    obj = draw(from_schema(schemas, schemas[openapi.schema_name(r.model)], depth=4, confuse=0.05))
    name = draw(names)
    if isinstance(obj, dict) and draw(st.integers(0, 9)) > 0:  # mostly a valid name, so writes get far
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        obj["metadata"] = {**meta, "name": name}
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
    verb = draw(st.sampled_from(VERBS))
    base = _base(r)
    if verb == "create":
        return "POST", base, _dumps(obj), "application/json"
    if verb == "create-yaml":
        return "POST", base, yaml.safe_dump(obj).encode(), "application/yaml"
    if verb in ("update", "status"):
        return "PUT", f"{base}/{name}" + ("/status" if verb == "status" else ""), _dumps(obj), \
            "application/json"
    if verb == "merge-patch":
        return "PATCH", f"{base}/{name}", _dumps(obj), "application/merge-patch+json"
    if verb == "strategic-patch":
        return "PATCH", f"{base}/{name}", _dumps(obj), "application/strategic-merge-patch+json"
    if verb == "apply":
        return "PATCH", f"{base}/{name}?fieldManager=fuzz", _dumps(obj), "application/apply-patch+yaml"
    if verb == "json-patch":
        ops = draw(st.lists(st.fixed_dictionaries(
            {"op": st.sampled_from(["add", "replace", "remove", "copy", "move", "test"]),
             "path": st.sampled_from(["/spec", "/metadata/labels", "/metadata/annotations/a", "/status", "/x"])},
            optional={"value": json_values, "from": st.sampled_from(["/metadata", "/spec"])}), max_size=4))
        return "PATCH", f"{base}/{name}", _dumps(ops), "application/json-patch+json"
    grace = draw(st.none() | st.integers(-5, 10**12))
    return "DELETE", f"{base}/{name}" + ("" if grace is None else f"?gracePeriodSeconds={grace}"), b"", \
        "application/json"


@given(requests())
def test_api_answers_every_generated_request_without_5xx_or_stall(
        harness: Harness, request: tuple[str, str, bytes, str]) -> None:
    harness.send(*request)
    if sum(harness.statuses.values()) % GROUP == 0:  # after each group the server must still answer at once
        started = time.perf_counter()
        assert harness.send("GET", "/readyz", None)[0] == 200
        assert time.perf_counter() - started < READY_WITHIN


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def test_server_is_ready_and_store_consistent_after_the_run(harness: Harness) -> None:
    started = time.perf_counter()
    status, _ = harness.send("GET", "/readyz", None)
    assert status == 200 and time.perf_counter() - started < READY_WITHIN
    checked = 0
    for r in TYPED:
        status, payload = harness.send("GET", _base(r).replace("/namespaces/default", ""), None)
        listed = {_key(o): o for o in orjson.loads(payload)["items"]}
        stored = harness.run(harness.store.list(r.key_prefix))
        in_store = {_key(o): o for o in map(decode, stored.items)}
        assert listed == in_store, r.plural
        for obj in in_store.values():
            assert typecheck.check(obj, r.model) is None, (r.plural, obj)
            checked += 1
    print(f"\nfuzz: {sum(harness.statuses.values())} requests, statuses {dict(sorted(harness.statuses.items()))}, "
          f"slowest {harness.slowest * 1000:.0f} ms, {checked} stored objects checked, "
          f"{len(harness.passing_stalls)} stalls that did not reproduce: {harness.passing_stalls}\n"
          f"{harness.probe.summary()}")
    assert max(harness.probe.latencies, default=0.0) < PROBE_BOUND, harness.probe.summary()
