"""StatefulSet sync decisions (stateful_set_control_test.go, by upstream test name) and the S1 rule, on a fake pod
control that behaves as the API server does: pod names are unique, a bound pod's delete is graceful (the object
stays, terminating, until its agent confirms), a terminal or unbound pod's delete is immediate."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelite.controllers import statefulset_utils as su
from kubelite.controllers.statefulset_control import StatefulSetControl, _Sync

Obj = dict[str, Any]
NOW = 1_700_000_000.0
_uids = itertools.count()


@dataclass
class FakePodControl:
    """fakeStatefulPodControl: pods by name; `unreachable` nodes never confirm a deletion."""
    pods: dict[str, Obj] = field(default_factory=dict)
    claims: dict[str, Obj] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)
    log: list[tuple[str, str]] = field(default_factory=list)  # (verb, pod name), in order
    ready_at_create: dict[str, list[str]] = field(default_factory=dict)  # pod → names Ready when it was created

    async def create_pod(self, set_: Obj, pod: Obj) -> bool:
        name = pod["metadata"]["name"]
        if name in self.pods:  # the API server's AlreadyExists
            self.log.append(("refused", name))
            return False
        for claim in su.pod_claims(set_, pod).values():
            self.claims.setdefault(claim["metadata"]["name"], claim)
        pod = copy.deepcopy(pod)
        pod["metadata"]["uid"] = f"uid-{next(_uids)}"
        pod["spec"]["nodeName"] = "node-a" if su.get_ordinal(pod) % 2 == 0 else "node-b"
        pod["status"] = {"phase": "Pending"}
        self.ready_at_create[name] = sorted(n for n, p in self.pods.items() if su.is_running_and_ready(p))
        self.pods[name] = pod
        self.log.append(("create", name))
        return True

    async def delete_pod(self, set_: Obj, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        current = self.pods.get(name)
        if current is None:
            return
        self.log.append(("delete", name))
        if (current.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            del self.pods[name]
        else:
            current["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"

    async def update_pod(self, set_: Obj, pod: Obj) -> None:
        self.log.append(("update", pod["metadata"]["name"]))

    def claims_match_policy(self, set_: Obj, pod: Obj) -> bool:
        return True

    async def update_claims_for_policy(self, set_: Obj, pod: Obj) -> None:
        raise AssertionError("not reached: claims always match")

    def event(self, set_: Obj, kind: str, reason: str, message: str) -> None:
        self.log.append(("event", reason))

    def agent_tick(self, make_ready: bool = True) -> bool:
        """Agents: finish deletions on reachable nodes; run and ready pending pods. Returns whether anything moved."""
        moved = False
        for name, pod in list(self.pods.items()):
            reachable = pod["spec"].get("nodeName") not in self.unreachable
            if su.is_terminating(pod) and reachable:
                del self.pods[name]
                moved = True
            elif pod["status"]["phase"] == "Pending" and make_ready and reachable:
                pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                moved = True
        return moved


def new_set(replicas: int = 3, policy: str = "OrderedReady", image: str = "nginx:1", **spec: Any) -> Obj:
    return {"metadata": {"name": "web", "namespace": "default", "uid": "set-uid", "generation": 1},
            "spec": {"replicas": replicas, "podManagementPolicy": policy, "serviceName": "web",
                     "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}, **spec},
            "status": {}}


@dataclass
class Harness:
    set: Obj
    control: FakePodControl = field(default_factory=FakePodControl)
    revisions: list[Obj] = field(default_factory=list)

    def _revs(self) -> tuple[Obj, Obj]:
        update = su.new_revision(self.set, len(self.revisions) + 1, None)
        same = [r for r in self.revisions if su.equal_revision(r, update)]
        if same:
            update = same[-1]
        else:
            self.revisions.append(update)
        name = self.set["status"].get("currentRevision")
        current = next((r for r in self.revisions if r["metadata"]["name"] == name), update)
        return current, update

    async def sync(self) -> Obj:
        current, update = self._revs()
        status = await StatefulSetControl(self.control).update(self.set, current, update,
                                                               list(self.control.pods.values()), NOW)
        self.set["status"] = status
        return status

    async def settle(self, make_ready: bool = True, rounds: int = 50) -> Obj:
        """Sync and let agents act until nothing changes."""
        status: Obj = {}
        for _ in range(rounds):
            before = len(self.control.log)
            status = await self.sync()
            moved = self.control.agent_tick(make_ready)
            if not moved and len(self.control.log) == before:
                return status
        raise AssertionError("did not settle")

    def images(self) -> dict[str, str]:
        return {n: p["spec"]["containers"][0]["image"] for n, p in sorted(self.control.pods.items())}

    def verbs(self, verb: str) -> list[str]:
        return [name for v, name in self.control.log if v == verb]


# --- TestStatefulSetControl ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["OrderedReady", "Parallel"])
async def test_creates_pods(policy: str) -> None:
    """CreatesPods: replicas pods named by ordinal, with identity labels and the update revision."""
    h = Harness(new_set(3, policy))
    status = await h.settle()
    assert sorted(h.control.pods) == ["web-0", "web-1", "web-2"]
    pod = h.control.pods["web-1"]
    assert pod["metadata"]["labels"][su.POD_NAME_LABEL] == "web-1"
    assert pod["metadata"]["labels"][su.POD_INDEX_LABEL] == "1"
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-1", "web")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert (status["replicas"], status["readyReplicas"], status["currentReplicas"], status["updatedReplicas"],
            status["availableReplicas"]) == (3, 3, 3, 3, 3)
    assert status["currentRevision"] == status["updateRevision"] == su.pod_revision(pod)


async def test_ordered_ready_creates_each_pod_after_its_predecessors_are_ready() -> None:
    h = Harness(new_set(3))
    await h.sync()
    assert sorted(h.control.pods) == ["web-0"]  # one at a time
    await h.sync()
    assert sorted(h.control.pods) == ["web-0"]  # web-0 not Ready yet: wait
    await h.settle()
    assert h.verbs("create") == ["web-0", "web-1", "web-2"]
    assert h.control.ready_at_create == {"web-0": [], "web-1": ["web-0"], "web-2": ["web-0", "web-1"]}


async def test_parallel_creates_all_pods_at_once() -> None:
    h = Harness(new_set(3, "Parallel"))
    await h.sync()
    assert sorted(h.control.pods) == ["web-0", "web-1", "web-2"]


@pytest.mark.parametrize("policy", ["OrderedReady", "Parallel"])
async def test_scales_up(policy: str) -> None:
    h = Harness(new_set(3, policy))
    await h.settle()
    h.set["spec"]["replicas"] = 5
    status = await h.settle()
    assert sorted(h.control.pods) == ["web-0", "web-1", "web-2", "web-3", "web-4"] and status["replicas"] == 5


@pytest.mark.parametrize("policy", ["OrderedReady", "Parallel"])
async def test_scales_down(policy: str) -> None:
    h = Harness(new_set(4, policy))
    await h.settle()
    h.set["spec"]["replicas"] = 1
    status = await h.settle()
    assert sorted(h.control.pods) == ["web-0"] and status["replicas"] == 1
    if policy == "OrderedReady":
        assert h.verbs("delete") == ["web-3", "web-2", "web-1"]  # highest ordinal first


async def test_ordered_scale_down_waits_for_each_termination() -> None:
    h = Harness(new_set(3))
    await h.settle()
    h.set["spec"]["replicas"] = 0
    await h.sync()
    await h.sync()
    assert h.verbs("delete") == ["web-2"]  # web-2 still terminating: nothing else this round


@pytest.mark.parametrize("policy", ["OrderedReady", "Parallel"])
async def test_replaces_pods(policy: str) -> None:
    """ReplacesPods: a pod deleted (and gone) is recreated under the same name."""
    h = Harness(new_set(3, policy))
    await h.settle()
    del h.control.pods["web-1"]
    await h.settle()
    assert sorted(h.control.pods) == ["web-0", "web-1", "web-2"]
    assert h.verbs("create").count("web-1") == 2


@pytest.mark.parametrize(("phase", "reason"), [
    pytest.param("Failed", "RecreatingFailedPod", id="RecreatesFailedPod"),
    pytest.param("Succeeded", "RecreatingTerminatedPod", id="RecreatesSucceededPod"),
])
async def test_recreates_terminal_pod(phase: str, reason: str) -> None:
    h = Harness(new_set(3))
    await h.settle()
    old_uid = h.control.pods["web-1"]["metadata"]["uid"]
    h.control.pods["web-1"]["status"] = {"phase": phase}
    await h.settle()
    assert h.control.pods["web-1"]["metadata"]["uid"] != old_uid
    assert ("event", reason) in h.control.log


async def test_set_being_deleted_only_reports_status() -> None:
    h = Harness(new_set(3))
    h.set["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"
    status = await h.sync()
    assert h.control.pods == {} and status["replicas"] == 0


# --- S1: at most one pod per identity, ever -----------------------------------------------------------


@pytest.mark.parametrize(("policy", "disturb", "want_created"), [
    pytest.param("OrderedReady", "terminating on unreachable node", False,
                 id="OrderedReady: a terminating web-1 on an unreachable node is never replaced"),
    pytest.param("Parallel", "terminating on unreachable node", False,
                 id="Parallel: a terminating web-1 on an unreachable node is never replaced"),
    pytest.param("OrderedReady", "failed on unreachable node, delete pending", False,
                 id="OrderedReady: a failed web-1 whose delete is pending is not replaced"),
    pytest.param("OrderedReady", "object gone", True, id="OrderedReady: replaced once the object is gone"),
    pytest.param("Parallel", "object gone", True, id="Parallel: replaced once the object is gone"),
])
async def test_s1_replacement_only_after_the_old_object_is_gone(policy: str, disturb: str,
                                                                want_created: bool) -> None:
    h = Harness(new_set(3, policy))
    await h.settle()
    web1 = h.control.pods["web-1"]
    if disturb == "object gone":
        del h.control.pods["web-1"]
    else:
        h.control.unreachable.add(web1["spec"]["nodeName"])
        web1["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"
        if disturb.startswith("failed"):
            web1["status"] = {"phase": "Failed"}
    creates_before = len(h.verbs("create"))
    for _ in range(10):  # many syncs while the node stays unreachable
        await h.sync()
        h.control.agent_tick()
        assert len([n for n in h.control.pods if n == "web-1"]) <= 1
    created = len(h.verbs("create")) > creates_before
    assert created == want_created
    assert "web-1" not in h.verbs("refused")  # the controller never even tried while the old object existed
    if not want_created:
        assert h.control.pods["web-1"]["metadata"]["uid"] == web1["metadata"]["uid"]  # the same object
        h.control.unreachable.clear()  # the node comes back: its agent finishes the deletion
        await h.settle()
        assert h.control.pods["web-1"]["metadata"]["uid"] != web1["metadata"]["uid"]


# --- TestStatefulSetControlRollingUpdate / WithPartition / OnDelete --------------------------------------


@pytest.mark.parametrize(("policy", "replicas"), [
    pytest.param("OrderedReady", 3, id="monotonic image update"),
    pytest.param("OrderedReady", 5, id="monotonic image update and scale up"),
    pytest.param("Parallel", 3, id="burst image update"),
])
async def test_rolling_update(policy: str, replicas: int) -> None:
    h = Harness(new_set(3, policy, image="nginx:1"))
    await h.settle()
    first = h.set["status"]["currentRevision"]
    h.set["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    h.set["spec"]["replicas"] = replicas
    status = await h.settle()
    assert set(h.images().values()) == {"nginx:2"} and len(h.images()) == replicas
    assert status["currentRevision"] == status["updateRevision"] != first
    assert status["updatedReplicas"] == status["currentReplicas"] == replicas
    assert h.verbs("delete") == ["web-2", "web-1", "web-0"]  # highest ordinal first, one at a time


@pytest.mark.parametrize(("partition", "want"), [
    pytest.param(0, {"web-0": "nginx:2", "web-1": "nginx:2", "web-2": "nginx:2"}, id="partition 0 updates all"),
    pytest.param(1, {"web-0": "nginx:1", "web-1": "nginx:2", "web-2": "nginx:2"},
                 id="partition 1 keeps ordinal 0 at the current revision"),
    pytest.param(3, {"web-0": "nginx:1", "web-1": "nginx:1", "web-2": "nginx:1"}, id="partition >= replicas"),
])
async def test_rolling_update_with_partition(partition: int, want: dict[str, str]) -> None:
    h = Harness(new_set(3, image="nginx:1"))
    await h.settle()
    first = h.set["status"]["currentRevision"]
    h.set["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}
    h.set["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    status = await h.settle()
    assert h.images() == want
    assert status["updatedReplicas"] == sum(1 for image in want.values() if image == "nginx:2")
    assert (status["currentRevision"] == first) == (partition > 0)
    del h.control.pods["web-0"]  # a pod below the partition comes back at the current revision
    await h.settle()
    assert h.images()["web-0"] == want["web-0"]


async def test_on_delete_update() -> None:
    h = Harness(new_set(3, image="nginx:1", updateStrategy={"type": "OnDelete"}))
    await h.settle()
    h.set["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    await h.settle()
    assert set(h.images().values()) == {"nginx:1"} and h.verbs("delete") == []
    del h.control.pods["web-1"]
    status = await h.settle()
    assert h.images() == {"web-0": "nginx:1", "web-1": "nginx:2", "web-2": "nginx:1"}
    assert (status["updatedReplicas"], status["currentReplicas"]) == (1, 2)


async def test_volume_claim_templates_create_claims_per_ordinal() -> None:
    h = Harness(new_set(2, volumeClaimTemplates=[{"metadata": {"name": "data"},
                                                  "spec": {"accessModes": ["ReadWriteOnce"]}}]))
    await h.settle()
    assert sorted(h.control.claims) == ["data-web-0", "data-web-1"]
    assert h.control.claims["data-web-0"]["metadata"]["labels"] == {"app": "web"}
    assert h.control.pods["web-1"]["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {
        "claimName": "data-web-1"}}]


# --- TestStatefulSetControlRollingUpdateWithMaxUnavailable -----------------------------------------------


def _unavailable(h: Harness, replicas: int) -> int:
    """Replicas missing, not Running and Ready, or terminating."""
    return sum(1 for i in range(replicas) if (p := h.control.pods.get(f"web-{i}")) is None
               or not su.is_running_and_ready(p) or su.is_terminating(p))


MAX_2_FROM_3 = {"type": "RollingUpdate", "rollingUpdate": {"partition": 3, "maxUnavailable": 2}}


@pytest.mark.parametrize("policy", ["OrderedReady", "Parallel"])
async def test_rolling_update_with_max_unavailable(policy: str) -> None:
    """6 pods, partition 3, maxUnavailable 2: pods 5 and 4 are deleted together, then 3 once they are back; never
    more than 2 replicas unavailable, and the pods below the partition are left at the old revision."""
    h = Harness(new_set(6, policy, image="nginx:1", updateStrategy=MAX_2_FROM_3))
    await h.settle()
    h.set["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    await h.sync()
    assert h.verbs("delete") == ["web-5", "web-4"]
    for _ in range(30):
        h.control.agent_tick()
        await h.sync()
        assert _unavailable(h, 6) <= 2
    assert h.verbs("delete") == ["web-5", "web-4", "web-3"]
    assert h.images() == {"web-0": "nginx:1", "web-1": "nginx:1", "web-2": "nginx:1",
                          "web-3": "nginx:2", "web-4": "nginx:2", "web-5": "nginx:2"}


@pytest.mark.parametrize("terminating", [
    pytest.param([], id="terminating pod at ordinal []"),
    pytest.param([5], id="terminating pod at ordinal [5]"),
    pytest.param([3], id="terminating pod at ordinal [3]"),
    pytest.param([4], id="terminating pod at ordinal [4]"),
    pytest.param([5, 4], id="terminating pod at ordinal [5 4]"),
    pytest.param([5, 3], id="terminating pod at ordinal [5 3]"),
    pytest.param([4, 3], id="terminating pod at ordinal [4 3]"),
    pytest.param([5, 4, 3], id="terminating pod at ordinal [5 4 3]"),
    pytest.param([2], id="terminating pod at ordinal [2]"),
    pytest.param([1], id="terminating pod at ordinal [1]"),
])
async def test_rolling_update_with_max_unavailable_in_ordered_mode_verify_invariant(terminating: list[int]) -> None:
    """TestStatefulSetControlRollingUpdateWithMaxUnavailableInOrderedModeVerifyInvariant: with some pods already
    terminating (below the partition too), the update deletes only as many as maxUnavailable leaves room for."""
    h = Harness(new_set(6, image="nginx:1", updateStrategy=MAX_2_FROM_3))
    await h.settle()
    for ordinal in terminating:
        h.control.pods[f"web-{ordinal}"]["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"
    current, _ = h._revs()
    update = {"metadata": {"name": ""}, "data": current["data"]}  # upstream's empty ControllerRevision
    await _Sync(h.control, h.set, current, update, list(h.control.pods.values()), NOW)._rolling_update(3, 2)
    assert len(h.verbs("delete")) == max(0, 2 - len(terminating))


async def test_parallel_rolling_update_replaces_broken_old_pods_without_spending_the_budget() -> None:
    """Upstream's two phases under Parallel: old pods that are unavailable anyway (web-1 here, not Ready) are
    replaced at once, and healthy ones only within maxUnavailable beside them."""
    h = Harness(new_set(6, "Parallel", image="nginx:1",
                        updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
    await h.settle()
    h.control.pods["web-1"]["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    h.set["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    await h.sync()
    assert h.verbs("delete") == ["web-1", "web-5"]  # 1 unavailable + 1 healthy = maxUnavailable 2
