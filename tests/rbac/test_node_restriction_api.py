"""NodeRestriction through a real API server (SQLite, HTTP on loopback) with `--authorization-mode Node,RBAC` and a
node's credentials: the refusals QA reproduced (a node deleting itself through an ownerReference to a missing
owner, dropping its own taints, minting unbound or other nodes' pod tokens) are upstream's 403 Status, and
what a kubelet does (registering with taints, its own Lease, tokens for its own pods) still works."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from cryptography.hazmat.primitives.asymmetric import ec

from kubelite.apiserver.auth.config import AuthConfig, ServiceAccountConfig
from kubelite.apiserver.auth.user import UserInfo
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.conftest import serving

Client = TestClient  # type: ignore[type-arg]
ADMIN = "admin-token"
NODE0 = "node0-token"
USERS = {NODE0: UserInfo("system:node:node0", groups=("system:nodes", "system:authenticated"))}
KEY = ec.generate_private_key(ec.SECP256R1())
NS = "/api/v1/namespaces/default"
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
MERGE = "application/merge-patch+json"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Client]:
    auth = AuthConfig(USERS, service_accounts=ServiceAccountConfig(KEY, (KEY.public_key(),)),
                      authorization_modes=("Node", "RBAC"))
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), frozenset({ADMIN}), auth) as client:
        yield client


async def call(api: Client, method: str, path: str, body: Any = None, token: str = ADMIN, expect: int = 200,
               content_type: str = "application/json") -> Any:
    resp = await api.request(method, path, data=None if body is None else orjson.dumps(body),
                             headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"})
    out = orjson.loads(await resp.read())
    assert resp.status == expect, (resp.status, out)
    return out


def forbidden(subject: str, name: str, reason: str) -> dict[str, Any]:
    """admission.NewForbidden's Status, as kubectl prints it."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{subject} "{name}" is forbidden: {reason}', "reason": "Forbidden",
            "details": {"name": name, "kind": subject}, "code": 403}


async def test_node_registers_with_taints_but_cannot_change_them_or_its_owners(api: Client) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node0"}, "spec": {"taints": [TAINT]}}
    await call(api, "POST", "/api/v1/nodes", node, token=NODE0, expect=201)  # --register-with-taints
    await call(api, "PATCH", "/api/v1/nodes/node0", {"metadata": {"labels": {"a": "b"}}}, token=NODE0,
               content_type=MERGE)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "missing", "uid": "no-such-uid"}
    for path in ("/api/v1/nodes/node0", "/api/v1/nodes/node0/status"):  # the status subresource keeps metadata
        assert await call(api, "PATCH", path, {"metadata": {"ownerReferences": [owner]}}, token=NODE0,
                          content_type=MERGE, expect=403) == forbidden(
            "nodes", "node0", 'node "node0" is not allowed to modify ownerReferences')
    assert await call(api, "PATCH", "/api/v1/nodes/node0", {"spec": {"taints": None}}, token=NODE0,
                      content_type=MERGE, expect=403) == forbidden(
        "nodes", "node0", 'node "node0" is not allowed to modify taints')
    stored = await call(api, "GET", "/api/v1/nodes/node0")
    assert stored["spec"]["taints"] == [TAINT] and "ownerReferences" not in stored["metadata"]
    await call(api, "PATCH", "/api/v1/nodes/node0", {"spec": {"taints": None}}, content_type=MERGE)  # an admin may


async def test_node_tokens_only_for_its_own_pods_by_uid(api: Client) -> None:
    await call(api, "POST", f"{NS}/serviceaccounts", {"metadata": {"name": "default"}}, expect=201)
    uids = {}
    for name, node in (("mine", "node0"), ("theirs", "node1")):
        pod = make_pod(name).obj()
        pod["spec"]["nodeName"] = node
        uids[name] = (await call(api, "POST", f"{NS}/pods", pod, expect=201))["metadata"]["uid"]
    token_path = f"{NS}/serviceaccounts/default/token"

    def request(name: str | None, uid: str | None = None) -> dict[str, Any]:
        ref = None if name is None else {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid or uids[name]}
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"boundObjectRef": ref}}

    refusals = [  # what `kubectl create token default [--bound-object-kind Pod ...]` sends
        (request(None), "node requested token not bound to a pod"),
        ({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "mine"}}},
         "node requested token with a pod binding without a uid"),
        (request("mine", "stale-uid"), "the UID in the bound object reference (stale-uid) does not match the UID in "
                                       "record. The object might have been deleted and then recreated"),
        (request("theirs"), "node requested token bound to a pod scheduled on a different node"),
    ]
    for body, reason in refusals:
        assert await call(api, "POST", token_path, body, token=NODE0, expect=403) == forbidden(
            "serviceaccounts", "default", reason)
    issued = await call(api, "POST", token_path, request("mine"), token=NODE0, expect=201)
    assert issued["status"]["token"]
    await call(api, "POST", token_path, request(None), expect=201)  # an admin's unbound token is not restricted


async def test_node_creates_only_its_own_lease(api: Client) -> None:
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

    def lease(name: str) -> dict[str, Any]:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}

    assert await call(api, "POST", leases, lease("node1"), token=NODE0, expect=403) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'leases.coordination.k8s.io "node1" is forbidden: can only access node lease with the same name '
                   "as the requesting node", "reason": "Forbidden",
        "details": {"name": "node1", "group": "coordination.k8s.io", "kind": "leases"}, "code": 403}
    await call(api, "POST", leases, lease("node0"), token=NODE0, expect=201)
    await call(api, "POST", leases, lease("node1"), expect=201)  # an admin may
