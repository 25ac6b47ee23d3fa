"""LimitRanges and ResourceQuotas against a real API server (in process) with the real resource quota controller:
admission charges, refuses with upstream's words and races safely; the controller measures and releases usage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.controllers.resourcequota import ResourceQuotaController
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_pod
from tests.api.test_rest import call
from tests.conftest import running

NS = "/api/v1/namespaces/default"
PODS = f"{NS}/pods"
QUOTAS = f"{NS}/resourcequotas"
LIMITS = f"{NS}/limitranges"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def resource_quota(name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard, **spec}}


def limit_range(name: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": list(items)}}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with running(await SQLiteStore.open(tmp_path / "state.db")) as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[InProcessClient]:
    """The in-process client, with the resource quota controller running on it."""
    client = InProcessClient(server)
    task = asyncio.create_task(ResourceQuotaController(client, RealClock()).run())
    yield client
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def measured(client: InProcessClient, name: str, **used: str) -> dict[str, Any]:
    """The quota once the controller (or admission) has written `used` (all of it, when `used` is empty)."""
    for _ in range(200):
        rq = await client.get(f"{QUOTAS}/{name}")
        status = rq.get("status") or {}
        if "used" in status and all(status["used"].get(k) == v for k, v in used.items()):
            return rq
        await asyncio.sleep(0.02)
    raise AssertionError(f"quota {name} never measured {used}: {rq.get('status')}")


async def refusal(coro: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await coro
    assert caught.value.code == 403, caught.value.message
    return caught.value.message


async def test_pods_beyond_the_quota_are_refused_with_upstreams_message(client: InProcessClient) -> None:
    await client.create(QUOTAS, resource_quota("q", {"pods": "2"}))
    await measured(client, "q", pods="0")
    for name in ("a", "b"):
        await client.create(PODS, make_pod(name).obj())
    rq = await client.get(f"{QUOTAS}/q")
    assert rq["status"] == {"hard": {"pods": "2"}, "used": {"pods": "2"}}
    message = await refusal(client.create(PODS, make_pod("c").obj()))
    assert message == 'pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2'


async def test_a_quota_is_enforced_once_its_status_says_what_it_limits(server: ApiServer) -> None:
    """As upstream, admission reads `status.hard`: a quota no controller has measured yet limits nothing, and one
    whose `hard` is known without its `used` refuses what it tracks until it is measured."""
    client = InProcessClient(server)  # no controller
    rq = await client.create(QUOTAS, resource_quota("q", {"pods": "1", "configmaps": "1"}))
    await client.create(PODS, make_pod("a").obj())
    await client.request("PUT", f"{QUOTAS}/q/status", {**rq, "status": {"hard": rq["spec"]["hard"]}})
    message = await refusal(client.create(PODS, make_pod("b").obj()))
    assert message == 'pods "b" is forbidden: status unknown for quota: q, resources: pods'


async def test_racing_creates_cannot_both_take_the_last_slot(client: InProcessClient) -> None:
    await client.create(QUOTAS, resource_quota("q", {"pods": "3"}))
    await measured(client, "q", pods="0")
    results = await asyncio.gather(*(client.create(PODS, make_pod(f"p{i}").obj()) for i in range(8)),
                                   return_exceptions=True)
    created = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, ApiError)]
    assert len(created) == 3 and len(refused) == 5
    assert all("exceeded quota: q" in r.message for r in refused)
    assert (await client.get(f"{QUOTAS}/q"))["status"]["used"] == {"pods": "3"}


async def test_two_api_servers_racing_for_the_last_slot(tmp_path: Path) -> None:
    """Two API servers on one store (as on one etcd): each charges through the store's compare-and-swap, so a
    server whose watch cache has not seen the other's charge loses the race, re-reads and re-checks."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    one, two = ApiServer(store, RealClock()), ApiServer(store, RealClock())
    await one.start()
    await two.start()
    try:
        a, b = InProcessClient(one), InProcessClient(two)
        rq = await a.create(QUOTAS, resource_quota("q", {"pods": "3"}))
        await a.request("PUT", f"{QUOTAS}/q/status", {**rq, "status": {"hard": {"pods": "3"}, "used": {"pods": "0"}}})
        for _ in range(100):  # the second server's cache has the measured quota
            if ((await b.get(f"{QUOTAS}/q")).get("status") or {}).get("used"):
                break
            await asyncio.sleep(0.01)
        results = await asyncio.gather(*((a if i % 2 else b).create(PODS, make_pod(f"p{i}").obj()) for i in range(10)),
                                       return_exceptions=True)
        assert sum(not isinstance(r, BaseException) for r in results) == 3
        assert all(isinstance(r, ApiError) and "exceeded quota: q" in r.message
                   for r in results if isinstance(r, BaseException))
        assert (await a.get(f"{QUOTAS}/q"))["status"]["used"] == {"pods": "3"}
    finally:
        await two.stop()
        await one.stop()
        await store.close()


async def test_deleted_and_finished_pods_release_their_usage(client: InProcessClient) -> None:
    await client.create(QUOTAS, resource_quota("q", {"pods": "2", "count/pods": "5"}))
    await measured(client, "q", pods="0")
    await client.create(PODS, make_pod("done").obj())
    await client.create(PODS, make_pod("gone").obj())
    await client.patch(f"{PODS}/done/status", {"status": {"phase": "Succeeded"}})
    await client.delete(f"{PODS}/gone")
    await measured(client, "q", pods="0", **{"count/pods": "1"})
    await client.create(PODS, make_pod("next").obj())


async def test_a_quota_on_limits_makes_pods_state_them(client: InProcessClient) -> None:
    await client.create(QUOTAS, resource_quota("compute", {"limits.cpu": "2", "requests.memory": "1Gi"}))
    await measured(client, "compute")
    message = await refusal(client.create(PODS, make_pod("p").req(memory="100Mi").obj()))
    assert message == 'pods "p" is forbidden: failed quota: compute: must specify limits.cpu for: main'
    await client.create(PODS, make_pod("ok").req(memory="512Mi").lim(cpu="1").obj())
    rq = await client.get(f"{QUOTAS}/compute")
    assert rq["status"]["used"] == {"limits.cpu": "1", "requests.memory": "512Mi"}
    message = await refusal(client.create(PODS, make_pod("big").req(memory="768Mi").lim(cpu="1").obj()))
    assert message == ('pods "big" is forbidden: exceeded quota: compute, requested: requests.memory=768Mi, '
                       'used: requests.memory=512Mi, limited: requests.memory=1Gi')


async def test_object_counts_for_configmaps_and_other_kinds(client: InProcessClient) -> None:
    await client.create(QUOTAS, resource_quota("objects", {"configmaps": "1", "count/secrets": "1"}))
    await measured(client, "objects")
    await client.create(f"{NS}/configmaps", {"metadata": {"name": "one"}})
    message = await refusal(client.create(f"{NS}/configmaps", {"metadata": {"name": "two"}}))
    assert message.endswith("exceeded quota: objects, requested: configmaps=1, used: configmaps=1, "
                            "limited: configmaps=1")
    await client.create(f"{NS}/secrets", {"metadata": {"name": "s1"}})
    assert "count/secrets=1" in await refusal(client.create(f"{NS}/secrets", {"metadata": {"name": "s2"}}))


async def test_a_limit_range_defaults_and_bounds_pods(client: InProcessClient) -> None:
    lr = await client.create(LIMITS, limit_range("lr", {"type": "Container", "max": {"cpu": "1"},
                                                        "default": {"cpu": "500m", "memory": "256Mi"},
                                                        "defaultRequest": {"cpu": "250m"}}))
    assert lr["spec"]["limits"][0]["defaultRequest"] == {"cpu": "250m", "memory": "256Mi"}  # SetDefaults
    pod = await client.create(PODS, make_pod("p").obj())
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main"
    assert pod["status"]["qosClass"] == "Burstable"
    message = await refusal(client.create(PODS, make_pod("big").lim(cpu="2").obj()))
    assert message == 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'


async def test_tables_show_upstreams_columns(api: TestClient) -> None:  # type: ignore[type-arg]
    """printResourceQuota: NAME AGE REQUEST LIMIT, `limits.*` apart; LimitRanges: NAME, CREATED AT."""
    rq = await call(api, "POST", QUOTAS, resource_quota("q", {"pods": "2", "limits.memory": "1Gi",
                                                              "requests.cpu": "1"}), expect=201)
    rq["status"] = {"hard": rq["spec"]["hard"], "used": {"pods": "1", "requests.cpu": "500m"}}
    await call(api, "PUT", f"{QUOTAS}/q/status", rq, expect=200)
    resp = await api.get(QUOTAS, headers={"Accept": TABLE})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age", "Request", "Limit"]
    cells = table["rows"][0]["cells"]
    assert cells[0] == "q" and cells[2:] == ["pods: 1/2, requests.cpu: 500m/1", "limits.memory: 0/1Gi"]
    await call(api, "POST", LIMITS, limit_range("lr", {"type": "Container", "max": {"cpu": "1"}}), expect=201)
    table = await (await api.get(LIMITS, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Created At"]


async def test_limit_range_defaults_satisfy_a_quota_on_limits(client: InProcessClient) -> None:
    """Admission order as upstream: LimitRanger's defaults are in place before quota admission asks for limits."""
    await client.create(LIMITS, limit_range("lr", {"type": "Container", "default": {"cpu": "500m", "memory": "128Mi"}}))
    await client.create(QUOTAS, resource_quota("compute", {"limits.cpu": "1", "limits.memory": "1Gi"}))
    await measured(client, "compute")
    await client.create(PODS, make_pod("p").obj())
    assert (await client.get(f"{QUOTAS}/compute"))["status"]["used"] == {"limits.cpu": "500m", "limits.memory": "128Mi"}


def _badly_named_big_pod() -> dict[str, Any]:
    pod = make_pod("big").lim(cpu="2").obj()
    pod["spec"]["containers"][0]["name"] = "Bad_Name"
    return pod


@pytest.mark.parametrize("path,item,body,field", [
    pytest.param(PODS, {"type": "Container", "max": {"cpu": "1"}}, _badly_named_big_pod(),
                 "spec.containers[0].name", id="a pod above max with an invalid container name"),
    pytest.param(f"{NS}/persistentvolumeclaims", {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}},
                 {"metadata": {"name": "c"}, "spec": {"accessModes": ["Bogus"],
                                                      "resources": {"requests": {"storage": "1Mi"}}}},
                 "spec.accessModes", id="a claim below min with an invalid access mode"),
])
async def test_limit_ranger_refuses_only_what_validation_accepts(client: InProcessClient, path: str,
                                                                  item: dict[str, Any], body: dict[str, Any],
                                                                  field: str) -> None:
    """Upstream runs LimitRanger's Validate in the validating phase, after the object's validation: an object both
    invalid and out of bounds is a 422 naming the invalid field, not LimitRanger's 403."""
    await client.create(LIMITS, limit_range("lr", item))
    with pytest.raises(ApiError) as caught:
        await client.create(path, body)
    assert caught.value.code == 422, caught.value.message
    assert field in caught.value.message
