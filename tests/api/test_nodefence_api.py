"""kubelite.io/v1alpha1 NodeFence through the API: validation (422 naming the field), the immutable node,
the status subresource, discovery and the Table columns `kubectl get nodefences` prints."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
FENCES = "/apis/kubelite.io/v1alpha1/nodefences"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def fence(name: str = "node-a", node: str | None = "node-a", status: Obj | None = None) -> Obj:
    obj: Obj = {"apiVersion": "kubelite.io/v1alpha1", "kind": "NodeFence", "metadata": {"name": name},
                "spec": {"nodeName": node} if node is not None else {}}
    if status is not None:
        obj["status"] = status
    return obj


async def test_a_node_fence_without_a_node_is_422(api: Client) -> None:
    out = await call(api, "POST", FENCES, fence(node=None), expect=422)
    assert "spec.nodeName" in [c.get("field") for c in out["details"]["causes"]], out


@pytest.mark.parametrize("status,field", [
    pytest.param({"phase": "Maybe"}, "status.phase", id="unsupported phase"),
    pytest.param({"attempts": -1}, "status.attempts", id="negative attempts"),
    pytest.param({"attempts": "three"}, "status.attempts", id="attempts not an integer"),
])
async def test_invalid_status_is_422_naming_the_field(api: Client, status: Obj, field: str) -> None:
    created = await call(api, "POST", FENCES, fence(), expect=201)
    out = await call(api, "PUT", f"{FENCES}/node-a/status", {**created, "status": status}, expect=422)
    assert out["reason"] == "Invalid" and field in [c.get("field") for c in out["details"]["causes"]], out


async def test_node_is_immutable_and_status_is_its_own_subresource(api: Client) -> None:
    created = await call(api, "POST", FENCES, fence(), expect=201)
    moved = {**created, "spec": {"nodeName": "node-b"}}
    out = await call(api, "PUT", f"{FENCES}/node-a", moved, expect=422)
    assert "spec.nodeName" in [c.get("field") for c in out["details"]["causes"]]
    status = {"phase": "Succeeded", "attempts": 2, "agent": "command", "message": "fence-ipmi exited 0"}
    out = await call(api, "PUT", f"{FENCES}/node-a/status", {**created, "status": status}, expect=200)
    assert out["status"] == status


async def test_discovery_and_table(api: Client) -> None:
    resources = await call(api, "GET", "/apis/kubelite.io/v1alpha1", expect=200)
    [res] = [r for r in resources["resources"] if r["name"] == "nodefences"]
    assert (res["kind"], res["namespaced"], res["shortNames"]) == ("NodeFence", False, ["nf"])
    created = await call(api, "POST", FENCES, fence(), expect=201)
    await call(api, "PUT", f"{FENCES}/node-a/status", {**created, "status": {
        "phase": "Failed", "attempts": 3, "agent": "webhook", "message": "answered 500"}}, expect=200)
    resp = await api.get(FENCES, headers={"Accept": TABLE})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Node", "Phase", "Attempts", "Agent", "Age",
                                                               "Message"]
    [row] = table["rows"]
    assert row["cells"][:5] == ["node-a", "node-a", "Failed", 3, "webhook"]
