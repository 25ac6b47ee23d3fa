"""Pod-specific API behaviour: graceful delete, binding, eviction with PDBs, watch semantics."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from kubelite.apiserver.app import ApiServer
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore
from kubelite.testing.builders import make_node, make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


async def _running(api: Client, name: str, ready: bool = True) -> None:
    await call(api, "PATCH", f"{PODS}/{name}/status",
               {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}},
               "application/merge-patch+json", expect=200)


async def test_graceful_delete_of_bound_pod_waits_for_agent(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").node("n1").grace(30).obj(), expect=201)
    await _running(api, "p")
    pod = await call(api, "DELETE", f"{PODS}/p", {"propagationPolicy": "Background"}, expect=200)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    first = pod["metadata"]["deletionTimestamp"]
    longer = await call(api, "DELETE", f"{PODS}/p?gracePeriodSeconds=60", expect=200)
    assert (longer["metadata"]["deletionGracePeriodSeconds"], longer["metadata"]["deletionTimestamp"]) == (30, first)
    shorter = await call(api, "DELETE", f"{PODS}/p", {"gracePeriodSeconds": 5}, expect=200)
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    await call(api, "GET", f"{PODS}/p", expect=200)
    # the node agent, after confirming the processes are gone, deletes with grace 0
    await call(api, "DELETE", f"{PODS}/p", {"gracePeriodSeconds": 0}, expect=200)
    await call(api, "GET", f"{PODS}/p", expect=404)


async def test_unscheduled_and_terminal_pods_are_deleted_at_once(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("pending").obj(), expect=201)
    await call(api, "DELETE", f"{PODS}/pending", expect=200)
    await call(api, "GET", f"{PODS}/pending", expect=404)
    await call(api, "POST", PODS, make_pod("done").node("n1").obj(), expect=201)
    await call(api, "PATCH", f"{PODS}/done/status", {"status": {"phase": "Succeeded"}},
               "application/merge-patch+json", expect=200)
    await call(api, "DELETE", f"{PODS}/done", expect=200)
    await call(api, "GET", f"{PODS}/done", expect=404)


async def test_delete_preconditions(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    status = await call(api, "DELETE", f"{PODS}/p", {"preconditions": {"uid": "other"}}, expect=409)
    assert "the UID in the precondition (other) does not match" in status["message"]


async def test_binding_assigns_once(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("p").obj(), expect=201)
    ok = await call(api, "POST", f"{PODS}/p/binding",
                    {"metadata": {"name": "p"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}},
                    expect=201)
    assert ok == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = await call(api, "GET", f"{PODS}/p")
    assert pod["spec"]["nodeName"] == "n1"
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [("PodScheduled", "True")]
    again = await call(api, "POST", "/api/v1/namespaces/default/bindings",
                       {"metadata": {"name": "p"}, "target": {"name": "n2"}}, expect=409)
    assert again["message"].endswith('pod p is already assigned to node "n1"')


async def test_gated_pod_cannot_be_bound_and_gates_only_shrink(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("g").scheduling_gates("a", "b").obj(), expect=201)
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
    await call(api, "POST", f"{PODS}/g/binding", {"target": {"name": "n1"}}, expect=409)
    grown = await call(api, "PATCH", f"{PODS}/g", {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"},
                                                                                {"name": "c"}]}},
                       "application/merge-patch+json", expect=422)
    assert "only deletion is allowed" in grown["message"]
    await call(api, "PATCH", f"{PODS}/g", {"spec": {"schedulingGates": [{"name": "b"}]}},
               "application/merge-patch+json", expect=200)


async def test_tolerations_may_only_be_added(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("t").obj(), expect=201)
    pod = await call(api, "GET", f"{PODS}/t")
    tolerations = [*pod["spec"]["tolerations"], {"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    await call(api, "PATCH", f"{PODS}/t", {"spec": {"tolerations": tolerations}}, "application/merge-patch+json",
               expect=200)
    # removing a default toleration is a no-op (DefaultTolerationSeconds re-adds it), removing ours is not
    kept = await call(api, "PATCH", f"{PODS}/t", {"spec": {"tolerations": tolerations[1:]}},
                      "application/merge-patch+json", expect=200)
    assert sorted(t["key"] for t in kept["spec"]["tolerations"]) == [
        "k", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    await call(api, "PATCH", f"{PODS}/t", {"spec": {"tolerations": tolerations[:-1]}},
               "application/merge-patch+json", expect=422)


async def _pdb(api: Client, **spec: Any) -> None:
    await call(api, "POST", PDBS, {"metadata": {"name": "budget"},
                                   "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}, expect=201)


async def test_eviction_respects_pdb(api: Client) -> None:
    for i in range(3):
        await call(api, "POST", PODS, make_pod(f"w{i}").label("app", "web").node("n1").obj(), expect=201)
        await _running(api, f"w{i}")
    await _pdb(api, minAvailable=2)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w0"}}
    await call(api, "POST", f"{PODS}/w0/eviction", body, expect=201)
    evicted = await call(api, "GET", f"{PODS}/w0")
    assert evicted["metadata"]["deletionTimestamp"]
    target = next(c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "EvictionByEvictionAPI")
    refused = await call(api, "POST", f"{PODS}/w1/eviction", {"metadata": {"name": "w1"}}, expect=429)
    assert refused["reason"] == "TooManyRequests"
    assert refused["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert refused["details"]["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget "
                                             "budget needs 2 healthy pods and has 2 currently"}]
    await call(api, "GET", f"{PODS}/w1", expect=200)


async def test_concurrent_evictions_never_overspend(api: Client) -> None:
    for i in range(4):
        await call(api, "POST", PODS, make_pod(f"w{i}").label("app", "web").node("n1").obj(), expect=201)
        await _running(api, f"w{i}")
    await _pdb(api, maxUnavailable=1)
    results = await asyncio.gather(*(api.post(f"{PODS}/w{i}/eviction", data=orjson.dumps({}),
                                              headers={"Content-Type": "application/json"}) for i in range(4)))
    assert sorted(r.status for r in results) == [201, 429, 429, 429]


async def test_unready_pod_evicted_without_budget(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("sick").label("app", "web").node("n1").obj(), expect=201)
    await _running(api, "sick", ready=False)
    await _pdb(api, minAvailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")
    await call(api, "POST", f"{PODS}/sick/eviction", {}, expect=201)


async def _watch(api: Client, query: str, n: int) -> list[dict[str, Any]]:
    resp = await api.get(f"{PODS}?watch=true&{query}")
    assert resp.status == 200
    events = []
    while len(events) < n:
        line = await asyncio.wait_for(resp.content.readline(), 5)
        if not line:
            break
        events.append(orjson.loads(line))
    resp.close()
    return events


async def test_watch_initial_events_in_resource_version_order(api: Client) -> None:
    await call(api, "POST", PODS, make_pod("b").obj(), expect=201)
    await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    events = await _watch(api, "allowWatchBookmarks=true", 3)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "b"), ("ADDED", "a"), ("BOOKMARK", None)]


async def test_watch_resumes_from_resource_version(api: Client) -> None:
    first = await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    await call(api, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    await call(api, "DELETE", f"{PODS}/a")
    events = await _watch(api, f"resourceVersion={first['metadata']['resourceVersion']}", 2)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(events[0]["object"]["metadata"][
        "resourceVersion"])


async def test_watch_selector_transitions(api: Client) -> None:
    pod = await call(api, "POST", PODS, make_pod("a").obj(), expect=201)
    rv = pod["metadata"]["resourceVersion"]
    await call(api, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    await call(api, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "2"}}}, "application/merge-patch+json")
    await call(api, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    await call(api, "DELETE", f"{PODS}/a")
    events = await _watch(api, f"resourceVersion={rv}&labelSelector=x%3D1", 4)
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED", "DELETED"]


async def test_watch_too_old_resource_version_is_expired(tmp_path: Path) -> None:
    """After a restart the watch cache starts at the stored revision; older versions are gone (410)."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    first = ApiServer(store, RealClock())
    await first.start()
    await first.stop()
    second = ApiServer(store, RealClock())
    await second.start()
    client = TestClient(TestServer(second.app()))
    await client.start_server()
    try:
        events = await _watch(client, "resourceVersion=1", 1)
        assert events[0]["type"] == "ERROR"
        assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")
        assert events[0]["object"]["message"].startswith("too old resource version: 1 (")
    finally:
        await client.close()
        await second.stop()
        await store.close()


async def test_watch_live_events_and_timeout(api: Client) -> None:
    resp = await api.get(f"{PODS}?watch=1&timeoutSeconds=1&resourceVersion=0")
    await call(api, "POST", PODS, make_pod("live").obj(), expect=201)
    lines = (await asyncio.wait_for(resp.read(), 5)).splitlines()
    assert [orjson.loads(line)["object"]["metadata"]["name"] for line in lines] == ["live"]


async def test_nodes_status_and_cordon(api: Client) -> None:
    node = await call(api, "POST", "/api/v1/nodes", make_node("n1"), expect=201)
    assert node["status"]["allocatable"]["cpu"] == "4"
    cordoned = await call(api, "PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}},
                          "application/strategic-merge-patch+json", expect=200)
    assert cordoned["spec"]["unschedulable"] is True
    listed = await call(api, "GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue")
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
