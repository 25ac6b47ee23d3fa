"""The observer's fence collectors against a real API server (SQLite file, HTTP): a force delete that no fence
and no agent confirmed is recorded and reported by `force-delete-needs-fence`; a fenced node's or a
terminated pod's removal is not; a cleared fence is recorded as such."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.client.http import STRATEGIC_PATCH, ApiClient, resource_path
from kubelite.clock import RealClock, rfc3339
from kubelite.controllers.fencing import GROUP_VERSION, fences_path
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.chaos import workload
from kubelite.testing.chaos.invariants import FENCING, run_checkers
from kubelite.testing.chaos.observer import Observer
from tests.conftest import serving

RUNNING: dict[str, Any] = {"phase": "Running", "containerStatuses": [
    {"name": "main", "ready": True, "restartCount": 0, "image": "busybox", "imageID": "",
     "state": {"running": {"startedAt": "2026-11-27T08:00:00Z"}}}]}
FAILED: dict[str, Any] = {"phase": "Failed", "containerStatuses": [
    {"name": "main", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
     "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[ApiClient]:
    async with serving(await SQLiteStore.open(tmp_path / "state.db")) as http:
        api = ApiClient(str(http.make_url("")))
        yield api
        await api.close()


async def _running_pod(client: ApiClient, name: str, node: str, status: dict[str, Any]) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}}
    created = await client.create(resource_path("pods", workload.NAMESPACE), body)
    await client.patch(resource_path("pods", workload.NAMESPACE, name, "status"),
                       {"metadata": {"uid": created["metadata"]["uid"]}, "status": status}, STRATEGIC_PATCH)


async def _confirmed_fence(client: ApiClient, node: str) -> None:
    fence = await client.create(fences_path(), {"apiVersion": GROUP_VERSION, "kind": "NodeFence",
                                                "metadata": {"name": node}, "spec": {"nodeName": node}})
    await client.request("PUT", fences_path(node, "status"), {**fence, "status": {
        "phase": "Succeeded", "attempts": 1, "agent": "command", "message": "powered off",
        "fencedTime": rfc3339(RealClock().now())}})


async def _until(check: Any) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the observer did not record it")


async def test_a_force_delete_without_a_fence_is_recorded_and_reported(client: ApiClient) -> None:
    observer = Observer(client, "run", RealClock())
    tasks = [asyncio.create_task(observer.list_fences()), asyncio.create_task(observer.watch_removals())]
    try:
        await _until(lambda: observer._pods_version)  # the watch is established: no deletion can slip by
        await _confirmed_fence(client, "node-b")
        await _until(lambda: observer.obs.fences)
        for name, node, status in (("unfenced", "node-a", RUNNING), ("fenced", "node-b", RUNNING),
                                   ("terminated", "node-a", FAILED)):
            await _running_pod(client, name, node, status)
            await client.delete(resource_path("pods", workload.NAMESPACE, name), {"gracePeriodSeconds": 0})
        await _until(lambda: len(observer.obs.removals) == 3)
        await client.delete(fences_path("node-b"))  # the administrator clears the fence
        await _until(lambda: observer.obs.fences[0].cleared is not None)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert [f.node for f in observer.obs.fences] == ["node-b"]
    violations, skipped = run_checkers(observer.obs, {FENCING})
    fence_violations = [v for v in violations if v.invariant == "force-delete-needs-fence"]
    assert len(fence_violations) == 1 and "unfenced" in fence_violations[0].message, violations
    assert not [s for s in skipped if s.startswith("force-delete-needs-fence")]


class InstantClient:
    """Answers every request after one loop turn: a cancellation then often arrives just as the answer
    does, the moment Python 3.11's `asyncio.wait_for` swallows it (CPython gh-86296)."""

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        await asyncio.sleep(0)
        return {}


async def test_no_write_is_acknowledged_after_stop_writing_returns() -> None:
    for turns in range(30):  # stop at every phase of the write loop
        observer = Observer(InstantClient(), "run", RealClock())  # type: ignore[arg-type]
        writer = asyncio.create_task(observer.write_acknowledged())
        for _ in range(turns):
            await asyncio.sleep(0)
        await asyncio.wait_for(observer.stop_writing(writer), 2)  # the writer ended: nothing acknowledged later
        assert writer.done(), turns
