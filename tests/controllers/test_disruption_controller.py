"""The disruption controller on the reconciler runner, against a real API server through the in-process client."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.errors import conflict, unavailable
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, RealClock
from kubelite.controllers.disruption import DisruptionController
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod

PODS = "/api/v1/namespaces/default/pods"
PDB = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


class FailingStatusWrites(InProcessClient):
    """The real server, except that the first status writes fail with the given errors."""

    def __init__(self, server: ApiServer, errors: list[Exception]) -> None:
        super().__init__(server)
        self.errors = errors
        self.failed = 0

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      params: Mapping[str, str] | None = None) -> Any:
        if method == "PUT" and path.endswith("/status") and self.errors:
            self.failed += 1
            raise self.errors.pop(0)
        return await super().request(method, path, body, content_type, params)


@pytest.mark.parametrize("errors", [
    pytest.param([], id="written at once"),
    pytest.param([unavailable("connection refused"), unavailable("connection refused")],
                 id="API unavailable twice: retried with back-off"),
    pytest.param([conflict("poddisruptionbudgets.policy", "budget", "the object has been modified")],
                 id="conflict: retried"),
])
async def test_budget_status_is_written_despite_failures(tmp_path: Path, errors: list[Exception]) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    server = ApiServer(store, RealClock())
    await server.start()
    client = FailingStatusWrites(server, list(errors))
    clock = FakeClock()
    ctrl = DisruptionController(client, clock)
    try:
        for name in ("a", "b"):
            await client.create(PODS, make_pod(name).label("app", "web").node("n1").obj())
            await client.patch(f"{PODS}/{name}/status", {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}})
        await client.create(PDB, {"metadata": {"name": "budget"},
                                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        task = asyncio.create_task(ctrl.run())
        status: dict[str, Any] = {}
        for _ in range(500):
            await clock.advance(0.005)
            await asyncio.sleep(0.002)  # lets the in-process watch deliver (real server time)
            status = (await client.get(f"{PDB}/budget")).get("status") or {}
            if status.get("expectedPods") == 2:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await server.stop()
        await store.close()
    assert (status.get("expectedPods"), status.get("disruptionsAllowed")) == (2, 1)
    assert client.failed == len(errors) and ctrl.runner.failures == len(errors)
