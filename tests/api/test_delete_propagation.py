"""DeleteOptions.propagationPolicy as finalizers, over real HTTP (store_test.go
TestDeletionFinalizersForGarbageCollection and TestStoreDeleteWithOrphanDependents, by behaviour)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_apps_workloads import BASE, RSS
from tests.api.test_batch_api import JOBS, job
from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]


@pytest.mark.parametrize(("existing", "options", "query", "want"), [
    pytest.param([], {"propagationPolicy": "Orphan"}, "", ["orphan"], id="orphan policy adds the orphan finalizer"),
    pytest.param([], {"propagationPolicy": "Foreground"}, "", ["foregroundDeletion"],
                 id="foreground policy adds foregroundDeletion"),
    pytest.param([], {}, "?propagationPolicy=Foreground", ["foregroundDeletion"], id="policy as a query parameter"),
    pytest.param([], {"orphanDependents": True}, "", ["orphan"], id="legacy orphanDependents=true"),
    pytest.param(["example.com/hold"], {"propagationPolicy": "Background"}, "", ["example.com/hold"],
                 id="background adds nothing; other finalizers stay"),
    pytest.param(["example.com/hold", "orphan"], {"propagationPolicy": "Foreground"}, "",
                 ["example.com/hold", "foregroundDeletion"], id="an explicit policy replaces the other finalizer"),
    pytest.param(["example.com/hold", "orphan"], {}, "", ["example.com/hold", "orphan"],
                 id="no policy: the object's own finalizer decides"),
])
async def test_deletion_finalizers_for_garbage_collection(api: Client, existing: list[str], options: Obj,
                                                          query: str, want: list[str]) -> None:
    body = {**BASE, "metadata": {"name": "web", "finalizers": existing}} if existing else BASE
    await call(api, "POST", RSS, body, expect=201)
    out = await call(api, "DELETE", f"{RSS}/web{query}", {"kind": "DeleteOptions", "apiVersion": "v1", **options},
                     expect=200)
    assert out["metadata"]["deletionTimestamp"]
    assert out["metadata"]["finalizers"] == want


async def test_background_deletes_at_once(api: Client) -> None:
    await call(api, "POST", RSS, BASE, expect=201)
    await call(api, "DELETE", f"{RSS}/web", {"propagationPolicy": "Background"}, expect=200)
    await call(api, "GET", f"{RSS}/web", expect=404)


@pytest.mark.parametrize(("options", "field"), [
    pytest.param({"propagationPolicy": "Sideways"}, "propagationPolicy", id="unknown policy"),
    pytest.param({"propagationPolicy": "Orphan", "orphanDependents": True}, "propagationPolicy",
                 id="both policy and orphanDependents"),
])
async def test_delete_options_validation(api: Client, options: Obj, field: str) -> None:
    await call(api, "POST", RSS, BASE, expect=201)
    status = await call(api, "DELETE", f"{RSS}/web", options, expect=422)
    assert status["details"]["causes"][0]["field"] == field
    await call(api, "GET", f"{RSS}/web", expect=200)  # nothing changed


JOB_WARNING = ('299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background '
               'to remove them or set propagationPolicy=Orphan to suppress this warning"')


@pytest.mark.parametrize(("options", "finalizers", "warned"), [
    pytest.param({}, ["orphan"], True, id="batch/v1 job without a policy orphans its pods and warns"),
    pytest.param({"propagationPolicy": "Background"}, None, False,
                 id="job with Background goes at once and deletes its pods, no warning (kubectl's default)"),
    pytest.param({"propagationPolicy": "Orphan"}, ["orphan"], False, id="job with Orphan: the warning is suppressed"),
    pytest.param({"orphanDependents": False}, None, False, id="job with legacy orphanDependents=false: no warning"),
])
async def test_job_default_garbage_collection_policy(api: Client, options: Obj, finalizers: list[str] | None,
                                                     warned: bool) -> None:
    """pkg/registry/batch/job/storage/storage.go: DefaultGarbageCollectionPolicy is OrphanDependents for
    batch/v1, and REST.Delete warns when the request chose no policy."""
    await call(api, "POST", JOBS, job("pi"), expect=201)
    resp = await api.delete(f"{JOBS}/pi", json={"kind": "DeleteOptions", "apiVersion": "v1", **options})
    assert resp.status == 200, await resp.text()
    assert (resp.headers.getall("Warning", []) == [JOB_WARNING]) is warned
    out = await resp.json()
    if finalizers is None:
        await call(api, "GET", f"{JOBS}/pi", expect=404)
    else:
        assert out["metadata"]["finalizers"] == finalizers


async def test_job_deletecollection_without_a_policy_warns_once(api: Client) -> None:
    for name in ("a", "b"):
        await call(api, "POST", JOBS, job(name), expect=201)
    resp = await api.delete(JOBS)
    assert resp.status == 200, await resp.text()
    assert resp.headers.getall("Warning", []) == [JOB_WARNING]
    for name in ("a", "b"):
        assert (await call(api, "GET", f"{JOBS}/{name}", expect=200))["metadata"]["finalizers"] == ["orphan"]
