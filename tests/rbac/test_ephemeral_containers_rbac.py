"""pods/ephemeralcontainers under the default RBAC policy, as upstream's: `edit` and `admin` do not grant it
(deliberately: an ephemeral container bypasses admission written before the subresource existed; kubernetes#109332,
#121217), so `kubectl debug` needs a rule for it — which a cluster role labelled aggregate-to-edit adds to `edit`."""

from __future__ import annotations

from pathlib import Path

import orjson
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod
from tests.rbac.test_rbac_api import RBAC, aggregated, bind_in_default, call, eventually, rbac_server

DEBUG_PATCH = {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}}
GRANT = {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch", "update"]}


async def test_edit_does_not_grant_ephemeral_containers_until_a_role_aggregates_it(tmp_path: Path) -> None:
    async with rbac_server(tmp_path / "state.db") as (api, _):
        await _edit_user_debugs(api)


async def _edit_user_debugs(api: TestClient) -> None:  # type: ignore[type-arg]
    for name in ("edit", "admin"):
        await aggregated(api, name)
        rules = (await call(api, "GET", f"{RBAC}/clusterroles/{name}"))["rules"]
        assert not any("pods/ephemeralcontainers" in r.get("resources", []) for r in rules), name
    await bind_in_default(api, "bob", "edit")
    await call(api, "POST", "/api/v1/namespaces/default/pods", make_pod("p").obj(), token="bob-token", expect=201)
    path = "/api/v1/namespaces/default/pods/p/ephemeralcontainers"
    refused = await call(api, "PATCH", path, DEBUG_PATCH, token="bob-token", expect=403)
    assert refused["message"] == ('pods "p" is forbidden: User "bob" cannot patch resource "pods/ephemeralcontainers" '
                                  'in API group "" in the namespace "default"')
    await call(api, "POST", f"{RBAC}/clusterroles", {"metadata": {"name": "debuggers", "labels": {
        "rbac.authorization.k8s.io/aggregate-to-edit": "true"}}, "rules": [GRANT]}, expect=201)
    await eventually(api, "edit", lambda rules: GRANT in rules)
    resp = await api.patch(path, data=orjson.dumps(DEBUG_PATCH), headers={
        "Authorization": "Bearer bob-token", "Content-Type": "application/strategic-merge-patch+json"})
    assert resp.status == 200, await resp.text()
    assert [c["name"] for c in (await resp.json())["spec"]["ephemeralContainers"]] == ["debugger"]
