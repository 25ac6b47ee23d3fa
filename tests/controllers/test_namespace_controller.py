"""The namespace controller's deletion conditions: status_condition_utils_test.go ported by case name
(TestUpdateConditions, TestProcessContentTotals), then the conditions a pass writes against a real API server."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.errors import ApiError, unavailable
from kubelite.controllers import namespace as nc
from kubelite.controllers.discovery import Discovery, discover_deletable
from kubelite.testing.builders import make_pod
from tests.controllers.fakecluster import Cluster, cluster, settle, sync

__all__ = ["cluster"]

Obj = dict[str, Any]
NOW = 1_700_000_000.0
TYPES = list(nc.CONDITIONS_OK)


def ok(kind: str) -> Obj:
    """newSuccessfulCondition."""
    return nc.condition(kind, "False", *nc.CONDITIONS_OK[kind], NOW)


def bare(kind: str, status: str, reason: str = "", message: str = "") -> Obj:
    out: Obj = {"type": kind, "status": status}
    if reason or message:
        out.update(reason=reason, message=message)
    return out


def _without_times(conditions: list[Obj]) -> list[Obj]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]


@pytest.mark.parametrize(("new", "starting", "expected"), [
    pytest.param([], [bare("unknown", "True")], [bare("unknown", "True"), *(ok(t) for t in TYPES)],
                 id="leave unknown"),
    pytest.param([], [bare(nc.DISCOVERY_FAILURE, "True")], [ok(t) for t in TYPES], id="replace with success"),
    pytest.param([], [bare(nc.GV_PARSING_FAILURE, "True"), bare(nc.DISCOVERY_FAILURE, "True")],
                 [ok(nc.GV_PARSING_FAILURE), ok(nc.DISCOVERY_FAILURE), ok(nc.CONTENT_FAILURE),
                  ok(nc.CONTENT_REMAINING), ok(nc.FINALIZERS_REMAINING)], id="leave different order"),
    pytest.param([bare(nc.GV_PARSING_FAILURE, "True", "foo", "bar")],
                 [bare(nc.GV_PARSING_FAILURE, "False"), bare(nc.DISCOVERY_FAILURE, "True")],
                 [bare(nc.GV_PARSING_FAILURE, "True", "foo", "bar"), ok(nc.DISCOVERY_FAILURE),
                  ok(nc.CONTENT_FAILURE), ok(nc.CONTENT_REMAINING), ok(nc.FINALIZERS_REMAINING)],
                 id="overwrite with failure"),
    pytest.param([bare(nc.GV_PARSING_FAILURE, "True", "foo", "bar")], [bare(nc.DISCOVERY_FAILURE, "True")],
                 [ok(nc.DISCOVERY_FAILURE), bare(nc.GV_PARSING_FAILURE, "True", "foo", "bar"),
                  ok(nc.CONTENT_FAILURE), ok(nc.CONTENT_REMAINING), ok(nc.FINALIZERS_REMAINING)],
                 id="write new failure"),
])
def test_update_conditions(new: list[Obj], starting: list[Obj], expected: list[Obj]) -> None:
    """TestUpdateConditions (times aside, as upstream copies them over before comparing)."""
    status: Obj = {"conditions": [dict(c) for c in starting]}
    assert nc.update_conditions(status, new, NOW)
    assert _without_times(status["conditions"]) == _without_times(expected)


def test_update_conditions_changes_nothing_twice() -> None:
    """A pass that finds what the last one found writes nothing (hasChanged false), and keeps the times."""
    status: Obj = {}
    nc.update_conditions(status, [], NOW)
    before = [dict(c) for c in status["conditions"]]
    assert not nc.update_conditions(status, [], NOW + 60)
    assert status["conditions"] == before


@pytest.mark.parametrize(("remaining", "finalizers", "expected"), [
    pytest.param({}, {}, [], id="nothing"),
    pytest.param({"daemonsets.apps.k8s.io": 5, "deployments.apps.k8s.io": 5}, {},
                 [bare(nc.CONTENT_REMAINING, "True", "SomeResourcesRemain",
                       "Some resources are remaining: daemonsets.apps.k8s.io has 5 resource instances, "
                       "deployments.apps.k8s.io has 5 resource instances")], id="just remaining"),
    pytest.param({}, {"service-catalog": 6, "kubedb": 5},
                 [bare(nc.FINALIZERS_REMAINING, "True", "SomeFinalizersRemain",
                       "Some content in the namespace has finalizers remaining: kubedb in 5 resource instances, "
                       "service-catalog in 6 resource instances")], id="just finalizers"),
    pytest.param({"daemonsets.apps.k8s.io": 5, "deployments.apps.k8s.io": 5}, {"service-catalog": 6, "kubedb": 5},
                 [bare(nc.CONTENT_REMAINING, "True", "SomeResourcesRemain",
                       "Some resources are remaining: daemonsets.apps.k8s.io has 5 resource instances, "
                       "deployments.apps.k8s.io has 5 resource instances"),
                  bare(nc.FINALIZERS_REMAINING, "True", "SomeFinalizersRemain",
                       "Some content in the namespace has finalizers remaining: kubedb in 5 resource instances, "
                       "service-catalog in 6 resource instances")], id="both"),
])
def test_process_content_totals(remaining: dict[str, int], finalizers: dict[str, int], expected: list[Obj]) -> None:
    """TestProcessContentTotals."""
    assert _without_times(nc.content_totals_conditions(remaining, finalizers, NOW)) == expected


@pytest.mark.parametrize(("found", "expected"), [
    pytest.param(Discovery(), [], id="all discovered"),
    pytest.param(Discovery(error="the server is currently unable to handle the request"),
                 [bare(nc.DISCOVERY_FAILURE, "True", "DiscoveryFailed",
                       "the server is currently unable to handle the request")], id="discovery failed as a whole"),
    pytest.param(Discovery(failed={"metrics.k8s.io/v1beta1": "service unavailable", "apps/v1": "timeout"}),
                 [bare(nc.DISCOVERY_FAILURE, "True", "DiscoveryFailed",
                       "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server "
                       "APIs: apps/v1: timeout, metrics.k8s.io/v1beta1: service unavailable")],
                 id="some groups failed (ErrGroupDiscoveryFailed)"),
    pytest.param(Discovery(unparsable=["a/b/v1"]),
                 [bare(nc.GV_PARSING_FAILURE, "True", "GroupVersionParsingFailed",
                       "unexpected GroupVersion string: a/b/v1")], id="a group version that does not parse"),
])
def test_discovery_conditions(found: Discovery, expected: list[Obj]) -> None:
    """ProcessDiscoverResourcesErr and ProcessGroupVersionErr."""
    assert _without_times(nc.discovery_conditions(found, NOW)) == expected


class _Discovery:
    """A discovery endpoint: `/apis` lists `groups`; a group version in `failing` cannot be listed."""

    def __init__(self, groups: list[str], failing: set[str]) -> None:
        self.groups, self.failing = groups, failing

    async def get(self, path: str, params: Any = None) -> Obj:
        if path == "/apis":
            return {"groups": [{"preferredVersion": {"groupVersion": gv}} for gv in self.groups]}
        gv = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
        if gv in self.failing:
            raise unavailable(f"{gv} is unavailable")
        return {"resources": [{"name": "things", "kind": "Thing", "namespaced": True,
                               "verbs": ["list", "watch", "delete"]}]}


@pytest.mark.parametrize(("groups", "failing", "resources", "failed", "unparsable"), [
    pytest.param(["apps/v1"], set(), ["v1", "apps/v1"], {}, [], id="every group listed"),
    pytest.param(["apps/v1", "batch/v1"], {"apps/v1"}, ["v1", "batch/v1"], {"apps/v1": "apps/v1 is unavailable"},
                 [], id="a failing group is left out, the others are emptied"),
    pytest.param(["apps/v1", "a/b/v1"], set(), [], {}, ["a/b/v1"],
                 id="an unparsable group version leaves no resource (GroupVersionResources returns none)"),
])
async def test_discover_deletable(groups: list[str], failing: set[str], resources: list[str], failed: dict[str, str],
                                  unparsable: list[str]) -> None:
    found = await discover_deletable(_Discovery(groups, failing))  # type: ignore[arg-type]
    assert [r.group_version for r in found.resources] == resources
    assert (found.failed, found.unparsable) == (failed, unparsable)


NS = "stuck"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
PODS = f"/api/v1/namespaces/{NS}/pods"
HELD = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
BOUND = make_pod("web", NS).node("node-a").grace(30).obj()  # a bound pod is deleted gracefully: its agent confirms


def state(*pairs: tuple[str, str, str]) -> dict[str, tuple[str, str]]:
    """Every condition type False/all well but those given as (type, reason, message) with status True."""
    out = {kind: ("False", reason) for kind, (reason, _) in nc.CONDITIONS_OK.items()}
    out.update({kind: ("True", f"{reason}: {message}") for kind, reason, message in pairs})
    return out


@pytest.mark.parametrize(("content", "after", "expected"), [
    pytest.param([(CONFIGMAPS, HELD)], 0.0, state(
        (nc.CONTENT_REMAINING, "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource "
                                                      "instances"),
        (nc.FINALIZERS_REMAINING, "SomeFinalizersRemain",
         "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")),
                 id="an object held by a finalizer: content and finalizers remaining"),
    pytest.param([(PODS, BOUND)], 0.0, state(
        (nc.CONTENT_REMAINING, "SomeResourcesRemain", "Some resources are remaining: pods. has 1 resource instances")),
                 id="a pod within its grace period remains, and that is no failure"),
    pytest.param([(PODS, BOUND)], 30.0, state(
        (nc.CONTENT_REMAINING, "SomeResourcesRemain", "Some resources are remaining: pods. has 1 resource instances"),
        (nc.CONTENT_FAILURE, "ContentDeletionFailed", "Failed to delete all resource types, 1 remaining: unexpected "
                                                      "items still remain in namespace: stuck for gvr: /v1, "
                                                      "Resource=pods")),
                 id="a pod past its grace period (an unreachable node) is a content failure"),
])
async def test_stuck_deletion_says_why(cluster: Cluster, content: list[tuple[str, Obj]], after: float,
                                       expected: dict[str, tuple[str, str]]) -> None:
    """What `kubectl describe ns` shows of a Terminating namespace whose content does not go."""
    await cluster.client.create("/api/v1/namespaces", {"metadata": {"name": NS}})
    for path, obj in content:
        await cluster.client.create(path, obj)
    await cluster.client.delete(f"/api/v1/namespaces/{NS}")
    ctrl = nc.NamespaceController(cluster.client, cluster.clock)
    await sync(ctrl.namespaces)
    await ctrl.sync(("", NS))
    if after:
        await settle(cluster.clock, after)
        await sync(ctrl.namespaces)
        await ctrl.sync(("", NS))
    ns = await cluster.client.get(f"/api/v1/namespaces/{NS}")
    got = {c["type"]: (c["status"], c["reason"] if c["status"] == "False" else f"{c['reason']}: {c['message']}")
           for c in ns["status"]["conditions"]}
    assert got == expected
    assert ns["status"]["phase"] == "Terminating"


async def test_emptied_namespace_reports_success_and_goes(cluster: Cluster) -> None:
    """Once its content is gone the conditions say so (False, upstream's messages), then the finalizer goes."""
    await cluster.client.create("/api/v1/namespaces", {"metadata": {"name": NS}})
    await cluster.client.create(CONFIGMAPS, HELD)
    await cluster.client.delete(f"/api/v1/namespaces/{NS}")
    ctrl = nc.NamespaceController(cluster.client, cluster.clock)
    await sync(ctrl.namespaces)
    await ctrl.sync(("", NS))
    await cluster.client.patch(f"{CONFIGMAPS}/held", {"metadata": {"finalizers": None}})
    await sync(ctrl.namespaces)
    seen: list[Obj] = []
    written = ctrl._write_conditions

    async def spy(ns: Obj, new: list[Obj], now: float) -> Obj:
        out = await written(ns, new, now)
        seen.extend(out["status"]["conditions"])
        return out

    ctrl._write_conditions = spy  # type: ignore[method-assign]
    await ctrl.sync(("", NS))
    assert {c["type"]: (c["status"], c["message"]) for c in seen} == {
        kind: ("False", message) for kind, (_, message) in nc.CONDITIONS_OK.items()}
    with pytest.raises(ApiError, match="not found"):
        await cluster.client.get(f"/api/v1/namespaces/{NS}")


def test_pod_estimate_ignores_terminal_pods() -> None:
    pods = [make_pod("a").grace(30).obj(), {**make_pod("b").grace(90).obj(), "status": {"phase": "Succeeded"}}]
    assert nc.pod_estimate(pods, NOW, NOW + 10) == 30
    assert nc.pod_estimate(pods, NOW, NOW + 30) == 0
