"""The StatefulSet controller against a real API server (in-process client), the test playing scheduler and agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.api.selectors import compile_label_selector
from kubelite.controllers import statefulset_utils as su
from kubelite.controllers.statefulset import StatefulSetController
from tests.controllers.harness import Harness, running

Obj = dict[str, Any]
STS = "/apis/apps/v1/namespaces/default/statefulsets"
REVS = "/apis/apps/v1/namespaces/default/controllerrevisions"
PODS = "/api/v1/namespaces/default/pods"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"


class Cluster(Harness):
    async def pods(self) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in (await self.client.get(PODS))["items"]}

    async def run_and_ready(self, name: str) -> None:
        """Scheduler and agent: bind to n1, then report Running and Ready."""
        await self.client.create(f"{PODS}/{name}/binding", {"apiVersion": "v1", "kind": "Binding",
                                                              "metadata": {"name": name},
                                                              "target": {"kind": "Node", "name": "n1"}})
        await self.client.patch(f"{PODS}/{name}/status", {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            "application/merge-patch+json")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with running(tmp_path, StatefulSetController) as h:
        yield Cluster(h.client, h.clock)


def sts(replicas: int = 3, **spec: Any) -> Obj:
    return {"metadata": {"name": "web"}, "spec": {
        "replicas": replicas, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}


async def test_ordered_start_status_and_revision(cluster: Cluster) -> None:
    await cluster.client.create(STS, sts(3, volumeClaimTemplates=[
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}]))
    for ordinal in range(3):
        name = f"web-{ordinal}"

        async def created(name: str = name) -> bool:
            return name in await cluster.pods()
        await cluster.until(created, name)
        await cluster.clock.advance(0.05)
        assert sorted(await cluster.pods()) == [f"web-{i}" for i in range(ordinal + 1)]  # the next waits
        await cluster.run_and_ready(name)

    async def all_ready() -> bool:
        return ((await cluster.client.get(f"{STS}/web")).get("status") or {}).get("readyReplicas") == 3
    await cluster.until(all_ready, "readyReplicas 3")
    status = (await cluster.client.get(f"{STS}/web"))["status"]
    revisions = (await cluster.client.get(REVS))["items"]
    assert len(revisions) == 1 and status["currentRevision"] == status["updateRevision"] == \
        revisions[0]["metadata"]["name"]
    assert (status["replicas"], status["currentReplicas"], status["updatedReplicas"], status["availableReplicas"],
            status["observedGeneration"]) == (3, 3, 3, 3, 1)
    claims = sorted(c["metadata"]["name"] for c in (await cluster.client.get(PVCS))["items"])
    assert claims == ["data-web-0", "data-web-1", "data-web-2"]


async def test_deleted_pod_is_replaced_only_after_its_object_is_gone(cluster: Cluster) -> None:
    """S1 through the API: a graceful delete leaves web-1 terminating; no new web-1 until the agent removes it."""
    await cluster.client.create(STS, sts(3, podManagementPolicy="Parallel"))

    async def three() -> bool:
        return len(await cluster.pods()) == 3
    await cluster.until(three, "three pods")
    for name in ("web-0", "web-1", "web-2"):
        await cluster.run_and_ready(name)
    old = (await cluster.pods())["web-1"]
    await cluster.client.delete(f"{PODS}/web-1")  # graceful: bound and running, it stays until its agent confirms
    for _ in range(100):
        await cluster.clock.advance(0.05)
        await asyncio.sleep(0.002)
        current = (await cluster.pods())["web-1"]
        assert current["metadata"]["uid"] == old["metadata"]["uid"] and current["metadata"]["deletionTimestamp"]
    await cluster.client.delete(f"{PODS}/web-1", {"gracePeriodSeconds": 0})  # the agent: processes confirmed dead

    async def replaced() -> bool:
        pod = (await cluster.pods()).get("web-1")
        return pod is not None and pod["metadata"]["uid"] != old["metadata"]["uid"]
    await cluster.until(replaced, "a new web-1")


async def test_rolling_update_creates_a_revision_and_replaces_highest_first(cluster: Cluster) -> None:
    await cluster.client.create(STS, sts(2, podManagementPolicy="Parallel"))

    async def two() -> bool:
        return len(await cluster.pods()) == 2
    await cluster.until(two, "two pods")
    for name in ("web-0", "web-1"):
        await cluster.run_and_ready(name)
    await cluster.client.patch(f"{STS}/web", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "busybox:2"}]}}}}, "application/merge-patch+json")

    async def web1_deleting() -> bool:
        pods = await cluster.pods()
        return bool(pods["web-1"]["metadata"].get("deletionTimestamp"))
    await cluster.until(web1_deleting, "web-1 deleted for update")
    assert not (await cluster.pods())["web-0"]["metadata"].get("deletionTimestamp")  # one at a time
    assert len((await cluster.client.get(REVS))["items"]) == 2


# --- ownership: TestGetPodsForStatefulSetAdopt / Release, TestAdoptOrphanRevisions -----------------------


def _pod(name: str, labels: dict[str, str] | None, owner: Obj | None) -> Obj:
    meta: Obj = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


APP = {"app": "web"}


@pytest.mark.parametrize(("pods", "want_claimed", "want_owned"), [
    pytest.param([("web-1", APP, True), ("web-2", APP, False), ("web-3", None, False), ("xweb-4", APP, False)],
                 ["web-1", "web-2"], ["web-1", "web-2"],
                 id="TestGetPodsForStatefulSetAdopt: an orphan with matching labels and name is adopted; wrong labels "
                    "or a wrong name are ignored"),
    pytest.param([("web-1", APP, True), ("xweb-2", APP, True), ("web-3", None, True), ("web-4", None, False)],
                 ["web-1"], ["web-1"],
                 id="TestGetPodsForStatefulSetRelease: owned pods with a wrong name or wrong labels are released, a "
                    "non-matching orphan ignored"),
])
async def test_get_pods_for_stateful_set(tmp_path: Path, pods: list[tuple[str, dict[str, str] | None, bool]],
                                         want_claimed: list[str], want_owned: list[str]) -> None:
    async with running(tmp_path) as h:
        set_ = await h.client.create(STS, sts(5))
        ctl = StatefulSetController(h.client, h.clock)
        for name, labels, owned in pods:
            ctl.pods.add(await h.client.create(PODS, _pod(name, labels, set_ if owned else None)))
        selector = compile_label_selector(set_["spec"]["selector"])
        claimed = await ctl._claim(set_, selector, ctl.pods, "pods", lambda p: su.is_member_of(set_, p))
        assert sorted(p["metadata"]["name"] for p in claimed) == want_claimed
        uid = set_["metadata"]["uid"]
        owned_now = sorted(p["metadata"]["name"] for p in (await h.client.get(PODS))["items"]
                           if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences") or []))
        assert owned_now == want_owned


async def test_adopt_orphan_revisions(tmp_path: Path) -> None:
    """TestAdoptOrphanRevisions: a ControllerRevision matching the set's selector, without a controller, is adopted."""
    async with running(tmp_path) as h:
        set_ = await h.client.create(STS, sts(1))
        ctl = StatefulSetController(h.client, h.clock)
        orphan = su.new_revision(set_, 2, None)
        orphan["metadata"].pop("ownerReferences", None)
        ctl.revisions.add(await h.client.create(REVS, orphan))
        selector = compile_label_selector(set_["spec"]["selector"])
        (adopted,) = await ctl._claim(set_, selector, ctl.revisions, "controllerrevisions")
        assert adopted["metadata"]["ownerReferences"][0]["uid"] == set_["metadata"]["uid"]


async def test_orphaned_pod_is_adopted_not_duplicated(cluster: Cluster) -> None:
    """A pod left by `kubectl delete sts --cascade=orphan` is adopted by the set created again: web-0 keeps running
    under its new owner and no second web-0 is attempted beside it (S1)."""
    orphan = await cluster.client.create(PODS, _pod("web-0", APP, None))
    await cluster.run_and_ready("web-0")
    set_ = await cluster.client.create(STS, sts(1))

    async def adopted() -> bool:
        pod = (await cluster.pods()).get("web-0") or {"metadata": {}}
        refs = pod["metadata"].get("ownerReferences") or []
        return any(r["uid"] == set_["metadata"]["uid"] and r.get("controller") for r in refs)
    await cluster.until(adopted, "web-0 adopted")
    assert (await cluster.pods())["web-0"]["metadata"]["uid"] == orphan["metadata"]["uid"]
