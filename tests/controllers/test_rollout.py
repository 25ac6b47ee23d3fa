"""Rolling-update arithmetic, ported from deployment_util_test.go and rolling_test.go by case name."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.clock import rfc3339
from kubelite.controllers import rollout as ro
from kubelite.controllers.revisions import compute_hash

Obj = dict[str, Any]


def deployment(replicas: int, max_surge: int | str | None = None, max_unavailable: int | str | None = None) -> Obj:
    rolling: Obj = {}
    if max_surge is not None:
        rolling["maxSurge"] = max_surge
    if max_unavailable is not None:
        rolling["maxUnavailable"] = max_unavailable
    return {"metadata": {"name": "foo", "generation": 1},
            "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}}


def rs(name: str, replicas: int, available: int = 0, age: int = 0) -> Obj:
    return {"metadata": {"name": name, "creationTimestamp": rfc3339(1_700_000_000 - age)},
            "spec": {"replicas": replicas}, "status": {"replicas": replicas, "availableReplicas": available}}


@pytest.mark.parametrize(("surge", "unavailable", "desired", "want"), [
    pytest.param("0%", "0%", 0, (0, 1), id="0% and 0% of 0: unavailability 1"),
    pytest.param("39%", "39%", 10, (4, 3), id="39% of 10: surge rounds up, unavailability down"),
    pytest.param(None, "39%", 10, (0, 3), id="no surge"),
    pytest.param("39%", None, 10, (4, 0), id="no unavailability"),
    pytest.param(None, None, 10, (0, 1), id="neither: unavailability 1"),
])
def test_resolve_fenceposts(surge: str | None, unavailable: str | None, desired: int, want: tuple[int, int]) -> None:
    """TestResolveFenceposts."""
    assert ro.resolve_fenceposts(surge, unavailable, desired) == want


@pytest.mark.parametrize(("surge", "unavailable"), [
    pytest.param("oops", "39%", id="bad surge"),
    pytest.param("55%", "urg", id="bad unavailability"),
])
def test_resolve_fenceposts_errors(surge: str, unavailable: str) -> None:
    """TestResolveFenceposts: the expectError cases."""
    with pytest.raises(ValueError, match="invalid value"):
        ro.resolve_fenceposts(surge, unavailable, 10)


@pytest.mark.parametrize(("d_replicas", "max_surge", "old", "new", "want"), [
    pytest.param(10, 0, 10, 0, None, id="Should not scale up"),
    pytest.param(10, 2, 10, 0, 2, id="scale up within maxSurge"),
    pytest.param(10, 2, 5, 0, 7, id="scale up to fill old and surge"),
    pytest.param(10, 2, 10, 2, None, id="surge used up: no scaling"),
    pytest.param(2, 2, 2, 4, 2, id="Should scale down"),
])
def test_deployment_controller_reconcile_new_replica_set(d_replicas: int, max_surge: int, old: int, new: int,
                                                         want: int | None) -> None:
    """TestDeploymentController_reconcileNewReplicaSet."""
    d = deployment(d_replicas, max_surge, 0)
    new_rs, old_rs = rs("foo-v2", new), rs("foo-v1", old, age=10)
    assert ro.reconcile_new(d, [old_rs, new_rs], new_rs) == want


@pytest.mark.parametrize(("d_replicas", "max_unavailable", "old", "new", "ready_old", "ready_new", "want"), [
    pytest.param(10, 0, 10, 0, 10, 0, 9, id="case 0: unavailability resolves to 1"),
    pytest.param(10, 2, 10, 0, 10, 0, 8, id="case 1: scale down by maxUnavailable"),
    pytest.param(10, 2, 10, 0, 8, 0, 8, id="case 2: unhealthy old replicas cleaned up"),
    pytest.param(10, 2, 10, 0, 9, 0, 8, id="case 3: one unhealthy cleaned up, one ready scaled down"),
    pytest.param(10, 2, 8, 2, 8, 0, None, id="case 4: unavailable new pods block further scale down"),
])
def test_deployment_controller_reconcile_old_replica_sets(d_replicas: int, max_unavailable: int, old: int, new: int,
                                                          ready_old: int, ready_new: int, want: int | None) -> None:
    """TestDeploymentController_reconcileOldReplicaSets."""
    d = deployment(d_replicas, None, max_unavailable)
    old_rs, new_rs = rs("foo-v1", old, ready_old, age=10), rs("foo-v2", new, ready_new)
    plan = ro.reconcile_old(d, [old_rs, new_rs], [old_rs], new_rs)
    assert plan.get("foo-v1") == want


@pytest.mark.parametrize(("old", "ready", "max_cleanup", "want"), [
    pytest.param(10, 8, 1, 1, id="case 0"),
    pytest.param(10, 8, 3, 2, id="case 1"),
    pytest.param(10, 8, 0, 0, id="case 2"),
    pytest.param(10, 10, 3, 0, id="case 3"),
])
def test_deployment_controller_cleanup_unhealthy_replicas(old: int, ready: int, max_cleanup: int, want: int) -> None:
    """TestDeploymentController_cleanupUnhealthyReplicas."""
    plan = ro.cleanup_unhealthy([rs("foo-v1", old, ready)], max_cleanup)
    assert old - plan.get("foo-v1", old) == want


@pytest.mark.parametrize(("d_replicas", "max_unavailable", "ready", "old", "want"), [
    pytest.param(10, 0, 10, 10, 9, id="case 0"),
    pytest.param(10, 2, 10, 10, 8, id="case 1"),
    pytest.param(10, 2, 8, 10, None, id="case 2: at minimum availability"),
    pytest.param(10, 2, 10, 0, None, id="case 3: nothing to scale down"),
    pytest.param(1, 0, 1, 1, 0, id="case 4"),
])
def test_deployment_controller_scale_down_old_replica_sets_for_rolling_update(
        d_replicas: int, max_unavailable: int, ready: int, old: int, want: int | None) -> None:
    """TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate."""
    d = deployment(d_replicas, None, max_unavailable)
    old_rs = rs("foo-v1", old, ready)
    plan = ro.scale_down_old_for_rolling_update(d, [old_rs], [old_rs])
    assert plan.get("foo-v1") == want


@pytest.mark.parametrize(("d_replicas", "surge", "sizes", "annotated_max", "want"), [
    pytest.param(20, 3, [("new", 5), ("old", 8)], 13, {"new": 9, "old": 14},
                 id="proportional scaling: 10 -> 20 with surge 3"),
    pytest.param(5, 3, [("new", 5), ("old", 8)], 13, {"new": 3, "old": 5},
                 id="proportional scaling down: leftovers to the largest"),
    pytest.param(0, 3, [("new", 5), ("old", 8)], 13, {"new": 0, "old": 0}, id="scaled to zero"),
])
def test_scale_proportionally(d_replicas: int, surge: int, sizes: list[tuple[str, int]], annotated_max: int,
                              want: dict[str, int]) -> None:
    """TestScale (sync_test.go), the proportional cases: each active ReplicaSet takes its share."""
    d = deployment(d_replicas, surge, 0)
    rss = []
    for age, (name, size) in enumerate(sizes):
        r = rs(name, size, age=age)
        r["metadata"]["annotations"] = {ro.MAX_REPLICAS: str(annotated_max)}
        rss.append(r)
    assert ro.proportional_scale(d, rss) == want


@pytest.mark.parametrize(("status", "want"), [
    pytest.param({"updatedReplicas": 3, "replicas": 3, "availableReplicas": 3, "observedGeneration": 1}, True,
                 id="complete"),
    pytest.param({"updatedReplicas": 3, "replicas": 4, "availableReplicas": 3, "observedGeneration": 1}, False,
                 id="old pods remain"),
    pytest.param({"updatedReplicas": 3, "replicas": 3, "availableReplicas": 2, "observedGeneration": 1}, False,
                 id="not all available"),
    pytest.param({"updatedReplicas": 3, "replicas": 3, "availableReplicas": 3, "observedGeneration": 0}, False,
                 id="not observed"),
])
def test_deployment_complete(status: Obj, want: bool) -> None:
    """TestDeploymentComplete."""
    assert ro.complete(deployment(3, 1, 0), status) is want


def test_deployment_timed_out() -> None:
    """TestDeploymentTimedOut: no progress for longer than progressDeadlineSeconds."""
    d = deployment(3, 1, 0)
    d["spec"]["progressDeadlineSeconds"] = 30
    status = {"conditions": [ro.new_condition("Progressing", "True", "ReplicaSetUpdated", "", 1_700_000_000)]}
    assert not ro.timed_out(d, status, 1_700_000_020)
    assert ro.timed_out(d, status, 1_700_000_031)


TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}


@pytest.mark.parametrize(("template", "count", "other_count"), [
    pytest.param({}, 1, 2, id="TestComputeHash: simple"),
    pytest.param({}, None, 2**31 - 1, id="TestComputeHash: using math.MaxInt64"),
    pytest.param(TEMPLATE, None, 0, id="a collision count of 0 differs from none"),
])
def test_compute_hash_differs_by_collision_count(template: Obj, count: int | None, other_count: int) -> None:
    assert compute_hash(template, count) != compute_hash(template, other_count)


@pytest.mark.parametrize(("template", "count", "want"), [
    pytest.param(TEMPLATE, None, "67f786fd6f", id="pinned: a template"),
    pytest.param(TEMPLATE, 1, "578f567456", id="pinned: the same template after one collision"),
    pytest.param({"spec": TEMPLATE["spec"], "metadata": TEMPLATE["metadata"]}, None, "67f786fd6f",
                 id="key order does not matter"),
])
def test_compute_hash_is_stable(template: Obj, count: int | None, want: str) -> None:
    """The value must never change between releases: a changed hash would make every Deployment roll out anew."""
    assert compute_hash(template, count) == want
