"""The Deployment controller with the ReplicaSet controller against a real API server; a stand-in kubelet
marks pods ready (the e2e tests use real agents)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock, rfc3339
from kubelite.controllers import rollout as ro
from kubelite.controllers.deployment import DeploymentController
from kubelite.controllers.replicaset import ReplicaSetController
from kubelite.controllers.revisions import compute_hash
from tests.controllers.conftest import eventually, running

Obj = dict[str, Any]
NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
RSS = f"/apis/apps/v1/namespaces/{NS}/replicasets"
DEPLOYS = f"/apis/apps/v1/namespaces/{NS}/deployments"
MERGE = "application/merge-patch+json"


def deployment(replicas: int = 4, strategy: Obj | None = None, history: int = 10) -> Obj:
    return {"metadata": {"name": "web"},
            "spec": {"replicas": replicas, "revisionHistoryLimit": history,
                     "strategy": strategy or {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}


async def kubelet(client: InProcessClient, ready: asyncio.Event) -> None:
    """Marks every pod Running and Ready while `ready` is set (pods are unbound: deletes are immediate)."""
    while True:
        if ready.is_set():
            for pod in (await client.get(PODS))["items"]:
                if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") == "Running":
                    continue
                with contextlib.suppress(Exception):
                    await client.patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": {
                        "phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                            "lastTransitionTime": rfc3339(1_700_000_000)}]}}, MERGE)
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def cluster(client: InProcessClient, clock: FakeClock) -> AsyncIterator[asyncio.Event]:
    ready = asyncio.Event()
    ready.set()
    async with running(ReplicaSetController(client, clock).run(), DeploymentController(client, clock).run(),
                       kubelet(client, ready)):
        yield ready


async def replicasets(client: InProcessClient) -> list[Obj]:
    """Oldest revision first."""
    return sorted((await client.get(RSS))["items"], key=revision)


def revision(rs: Obj) -> int:
    return int((rs["metadata"].get("annotations") or {}).get(ro.REVISION, "0"))


async def rolled_out(client: InProcessClient, revision: str, replicas: int = 4) -> bool:
    d = await client.get(f"{DEPLOYS}/web")
    st = d.get("status") or {}
    progressing = ro.condition(st, "Progressing") or {}
    return (d["metadata"].get("annotations") or {}).get(ro.REVISION) == revision and \
        st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas") == replicas and \
        st.get("replicas") == replicas and st.get("availableReplicas") == replicas and \
        progressing.get("reason") == ro.NEW_RS_AVAILABLE


async def test_rolling_update_creates_new_revision_and_scales_old_down(client: InProcessClient) -> None:
    clock = FakeClock()
    await client.create(DEPLOYS, deployment(history=0))
    async with cluster(client, clock):
        await eventually(lambda: rolled_out(client, "1"), clock=clock, timeout=20)
        (first,) = await replicasets(client)
        pod_hash = first["metadata"]["labels"][ro.HASH_LABEL]
        assert first["metadata"]["name"] == f"web-{pod_hash}"
        assert first["spec"]["selector"]["matchLabels"] == {"app": "web", ro.HASH_LABEL: pod_hash}
        assert first["metadata"]["annotations"][ro.REVISION] == "1"
        pods = (await client.get(PODS))["items"]
        assert len(pods) == 4 and all(p["metadata"]["labels"][ro.HASH_LABEL] == pod_hash for p in pods)
        await client.patch(f"{DEPLOYS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "busybox:2"}]}}}}, MERGE)
        await eventually(lambda: rolled_out(client, "2"), clock=clock, timeout=20)

        async def old_collected() -> bool:
            return len(await replicasets(client)) == 1  # revisionHistoryLimit 0

        await eventually(old_collected, clock=clock)
    (second,) = await replicasets(client)
    assert second["metadata"]["annotations"][ro.REVISION] == "2"
    assert second["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"
    d = await client.get(f"{DEPLOYS}/web")
    assert ro.condition(d["status"], "Available")["status"] == "True"  # type: ignore[index]


async def test_rolling_update_keeps_availability(client: InProcessClient) -> None:
    """While new pods are not ready, old ones are scaled down only within maxUnavailable (25% of 4 = 1)."""
    clock = FakeClock()
    await client.create(DEPLOYS, deployment())
    async with cluster(client, clock) as ready:
        await eventually(lambda: rolled_out(client, "1"), clock=clock, timeout=20)
        ready.clear()  # new pods will stay unready
        await client.patch(f"{DEPLOYS}/web", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}}, MERGE)

        async def settled() -> bool:
            rss = await replicasets(client)
            return len(rss) == 2 and ro.replicas(rss[1]) == 2 and ro.replicas(rss[0]) == 3

        await eventually(settled, clock=clock)
        for _ in range(10):
            await clock.advance(0.1)
            await asyncio.sleep(0.02)
        old, new = await replicasets(client)
        assert (ro.replicas(old), ro.replicas(new)) == (3, 2)  # surge 1 over 4, at most 1 unavailable
        ready.set()
        await eventually(lambda: rolled_out(client, "2"), clock=clock, timeout=20)


async def test_recreate_scales_old_to_zero_before_creating_new(client: InProcessClient) -> None:
    clock = FakeClock()
    await client.create(DEPLOYS, deployment(replicas=2, strategy={"type": "Recreate"}))
    async with cluster(client, clock):
        await eventually(lambda: rolled_out(client, "1", 2), clock=clock, timeout=20)
        await client.patch(f"{DEPLOYS}/web", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}}, MERGE)
        await eventually(lambda: rolled_out(client, "2", 2), clock=clock, timeout=20)
    old, new = await replicasets(client)
    assert (ro.replicas(old), ro.replicas(new)) == (0, 2)


async def test_paused_deployment_does_not_roll_out(client: InProcessClient) -> None:
    """Paused: a template change creates no ReplicaSet; Progressing is Unknown/DeploymentPaused; resume rolls."""
    clock = FakeClock()
    await client.create(DEPLOYS, deployment(replicas=2))
    async with cluster(client, clock):
        await eventually(lambda: rolled_out(client, "1", 2), clock=clock, timeout=20)
        await client.patch(f"{DEPLOYS}/web", {"spec": {"paused": True, "template": {"metadata": {"labels": {
            "v": "2"}}}}}, MERGE)

        async def paused() -> bool:
            cond = ro.condition((await client.get(f"{DEPLOYS}/web")).get("status") or {}, "Progressing") or {}
            return (cond.get("status"), cond.get("reason")) == ("Unknown", ro.PAUSED)

        await eventually(paused, clock=clock)
        assert len(await replicasets(client)) == 1
        await client.patch(f"{DEPLOYS}/web/scale", {"spec": {"replicas": 3}}, MERGE)

        async def scaled() -> bool:
            return [ro.replicas(rs) for rs in await replicasets(client)] == [3]

        await eventually(scaled, clock=clock)  # a paused Deployment still scales
        await client.patch(f"{DEPLOYS}/web", {"spec": {"paused": False}}, MERGE)
        await eventually(lambda: rolled_out(client, "2", 3), clock=clock, timeout=20)


async def test_progress_deadline_exceeded(client: InProcessClient) -> None:
    """No progress for progressDeadlineSeconds: Progressing False, ProgressDeadlineExceeded."""
    clock = FakeClock()
    body = deployment(replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 30
    await client.create(DEPLOYS, body)
    async with cluster(client, clock) as ready:
        ready.clear()

        async def timed_out() -> bool:
            cond = ro.condition((await client.get(f"{DEPLOYS}/web")).get("status") or {}, "Progressing") or {}
            return (cond.get("status"), cond.get("reason")) == ("False", ro.TIMED_OUT)

        await eventually(timed_out, clock=clock, step=1.0, timeout=20)


async def test_hash_collision_bumps_collision_count_and_rehashes(client: InProcessClient) -> None:
    """TestGetNewReplicaSet's hash-collision path (sync.go getNewReplicaSet): a ReplicaSet of another template
    already has the new one's name, so collisionCount goes up and the next sync names the ReplicaSet anew."""
    clock = FakeClock()
    stored = await client.create(DEPLOYS, deployment(replicas=1))
    taken = f"web-{compute_hash(stored['spec']['template'], None)}"
    await client.create(RSS, {"metadata": {"name": taken, "labels": {"app": "other"}}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "other"}},
        "template": {"metadata": {"labels": {"app": "other"}},
                     "spec": {"containers": [{"name": "c", "image": "other"}]}}}})
    async with cluster(client, clock):
        await eventually(lambda: rolled_out(client, "1", 1), clock=clock, timeout=20)
    d = await client.get(f"{DEPLOYS}/web")
    assert d["status"]["collisionCount"] == 1
    names = {rs["metadata"]["name"]: rs for rs in await replicasets(client)}
    assert set(names) == {taken, f"web-{compute_hash(stored['spec']['template'], 1)}"}
    assert not names[taken]["metadata"].get("ownerReferences")  # the other ReplicaSet is left alone


async def test_undo_with_a_null_creation_timestamp_reuses_the_old_replica_set(client: InProcessClient) -> None:
    """kubectl rollout undo copies revision 1's template back with `metadata.creationTimestamp: null` (the API
    server keeps a null time): EqualIgnoreHash is semantic, so revision 1's ReplicaSet becomes revision 3 —
    no third ReplicaSet, and `rollout history` lists 2 and 3."""
    clock = FakeClock()
    await client.create(DEPLOYS, deployment(replicas=1))
    async with cluster(client, clock):
        await eventually(lambda: rolled_out(client, "1", 1), clock=clock, timeout=20)
        await client.patch(f"{DEPLOYS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "busybox:2"}]}}}}, MERGE)
        await eventually(lambda: rolled_out(client, "2", 1), clock=clock, timeout=20)
        first = (await replicasets(client))[0]
        undo = {**first["spec"]["template"], "metadata": {"creationTimestamp": None, "labels": {"app": "web"}}}
        await client.patch(f"{DEPLOYS}/web", [{"op": "replace", "path": "/spec/template", "value": undo}],
                           "application/json-patch+json")
        assert (await client.get(f"{DEPLOYS}/web"))["spec"]["template"]["metadata"]["creationTimestamp"] is None
        await eventually(lambda: rolled_out(client, "3", 1), clock=clock, timeout=20)
    rss = await replicasets(client)
    assert len(rss) == 2 and rss[1]["metadata"]["name"] == first["metadata"]["name"]
    assert [revision(rs) for rs in rss] == [2, 3]
    assert rss[1]["metadata"]["annotations"][ro.REVISION_HISTORY] == "1"


@pytest.mark.parametrize(("replicas", "ready", "absent", "present"), [
    pytest.param(2, True, {"unavailableReplicas"},
                 {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
                  "availableReplicas": 2}, id="rolled out: no unavailableReplicas 0"),
    pytest.param(0, True, {"replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                           "unavailableReplicas"}, {"observedGeneration": 1}, id="scaled to zero: no zero counts"),
    pytest.param(1, False, {"readyReplicas", "availableReplicas"},
                 {"replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1}, id="unready: no ready counts"),
])
async def test_status_leaves_out_zero_counts(client: InProcessClient, replicas: int, ready: bool, absent: set[str],
                                            present: Obj) -> None:
    """DeploymentStatus's counts are omitempty int32s upstream: a 0 is not written (kubectl reads it as 0)."""
    clock = FakeClock()
    await client.create(DEPLOYS, deployment(replicas=replicas))
    async with cluster(client, clock) as is_ready:
        if not ready:
            is_ready.clear()

        async def written() -> bool:
            st = (await client.get(f"{DEPLOYS}/web")).get("status") or {}
            return all(st.get(k) == v for k, v in present.items()) and ro.condition(st, "Available") is not None

        await eventually(written, clock=clock, timeout=20)
    assert not absent & set((await client.get(f"{DEPLOYS}/web"))["status"])
