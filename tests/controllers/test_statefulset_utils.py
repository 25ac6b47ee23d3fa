"""Ported from stateful_set_utils_test.go (upstream test names): identities, storage, revisions, claim owners."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelite.controllers import statefulset_utils as su

Obj = dict[str, Any]


def new_set(replicas: int = 3, when_deleted: str = "Retain", when_scaled: str = "Retain") -> Obj:
    return {"metadata": {"name": "foo", "namespace": "default", "uid": "set-uid"},
            "spec": {"replicas": replicas, "serviceName": "governingsvc",
                     "selector": {"matchLabels": {"foo": "bar"}},
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": when_deleted, "whenScaled": when_scaled},
                     "volumeClaimTemplates": [{"metadata": {"name": "datadir"}, "spec": {}}],
                     "template": {"metadata": {"labels": {"foo": "bar"}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx"}],
                                           "volumes": [{"name": "home", "hostPath": {"path": "/tmp/home"}}]}}}}


def test_get_parent_name_and_ordinal() -> None:
    """TestGetParentNameAndOrdinal."""
    set_ = new_set()
    pod = su.new_stateful_set_pod(set_, 1)
    assert su.parent_and_ordinal(pod) == ("foo", 1)
    pod["metadata"]["name"] = "1-bar"
    assert su.parent_and_ordinal(pod) == ("", -1)
    pod["metadata"]["name"] = "foo-bar-12"
    assert su.parent_and_ordinal(pod) == ("foo-bar", 12)


@pytest.mark.parametrize(("mutate", "matches"), [
    pytest.param(lambda p: None, True, id="newly created Pod has a valid identity"),
    pytest.param(lambda p: p["metadata"].update(name="foo-2"), False, id="identity matches for a Pod with the wrong "
                                                                          "name"),
    pytest.param(lambda p: p["metadata"].update(namespace="other"), False,
                 id="identity matches for a Pod with the wrong namespace"),
    pytest.param(lambda p: p["metadata"]["labels"].pop(su.POD_NAME_LABEL), False,
                 id="identity matches for a Pod without the pod-name label"),
])
def test_identity_matches(mutate: Any, matches: bool) -> None:
    """TestIdentityMatches."""
    set_ = new_set()
    pod = su.new_stateful_set_pod(set_, 1)
    mutate(pod)
    assert su.identity_matches(set_, pod) == matches


def test_update_identity() -> None:
    """TestUpdateIdentity: a pod with a wrong name or namespace gets its ordinal's identity back."""
    set_ = new_set()
    pod = su.new_stateful_set_pod(set_, 1)
    pod["metadata"]["namespace"] = "other"
    pod["metadata"]["labels"].pop(su.POD_NAME_LABEL)
    assert not su.identity_matches(set_, pod)
    su.update_identity(set_, pod)
    assert su.identity_matches(set_, pod)


@pytest.mark.parametrize(("mutate", "matches"), [
    pytest.param(lambda p: None, True, id="newly created Pod has valid storage"),
    pytest.param(lambda p: p["spec"]["volumes"][0]["persistentVolumeClaim"].update(claimName="wrong"), False,
                 id="storage matches for a Pod with the wrong claim name"),
    pytest.param(lambda p: p["spec"].update(volumes=p["spec"]["volumes"][1:]), False,
                 id="storage matches for a Pod without the claim volume"),
])
def test_storage_matches(mutate: Any, matches: bool) -> None:
    """TestStorageMatches."""
    set_ = new_set()
    pod = su.new_stateful_set_pod(set_, 1)
    mutate(pod)
    assert su.storage_matches(set_, pod) == matches


def test_update_storage() -> None:
    """TestUpdateStorage: claim volumes point at the ordinal's claims; other volumes are kept."""
    set_ = new_set()
    pod = su.new_stateful_set_pod(set_, 1)
    pod["spec"]["volumes"] = [{"name": "home", "hostPath": {"path": "/tmp/home"}}]
    assert not su.storage_matches(set_, pod)
    su.update_storage(set_, pod)
    assert su.storage_matches(set_, pod)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["datadir", "home"]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "datadir-foo-1"


@pytest.mark.parametrize(("status", "ready"), [
    pytest.param({}, False, id="pod without status"),
    pytest.param({"phase": "Running"}, False, id="running pod without Ready"),
    pytest.param({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}, False,
                 id="running pod not ready"),
    pytest.param({"phase": "Pending", "conditions": [{"type": "Ready", "status": "True"}]}, False,
                 id="pending pod ready"),
    pytest.param({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, True,
                 id="running and ready"),
])
def test_is_running_and_ready(status: Obj, ready: bool) -> None:
    """TestIsRunningAndReady."""
    pod = su.new_stateful_set_pod(new_set(), 1)
    pod["status"] = status
    assert su.is_running_and_ready(pod) == ready


def test_new_pod_controller_ref() -> None:
    """TestNewPodControllerRef."""
    set_ = new_set()
    ref = su.new_stateful_set_pod(set_, 1)["metadata"]["ownerReferences"][0]
    assert ref == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "foo", "uid": "set-uid",
                   "controller": True, "blockOwnerDeletion": True}


def test_create_apply_revision() -> None:
    """TestCreateApplyRevision: a revision stores the template; applying it restores that template."""
    set_ = new_set()
    revision = su.new_revision(set_, 1, None)
    assert revision["metadata"]["name"] == f"foo-{revision['metadata']['labels'][su.HASH_LABEL]}"
    assert revision["metadata"]["labels"]["foo"] == "bar" and revision["revision"] == 1
    changed = copy.deepcopy(set_)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    restored = su.apply_revision(changed, revision)
    assert restored["spec"]["template"] == set_["spec"]["template"]
    other = su.new_revision(changed, 2, None)
    assert not su.equal_revision(revision, other)
    assert su.equal_revision(revision, su.new_revision(set_, 7, None))  # same template, another number
    assert su.new_revision(set_, 1, 1)["metadata"]["name"] != revision["metadata"]["name"]  # collision probe


@pytest.mark.parametrize(("annotations", "want"), [
    pytest.param(None, None, id="set without annotations, revision without"),
    pytest.param({}, None, id="empty annotations are omitted"),
    pytest.param({"kubernetes.io/change-cause": "kubectl set image sts/foo nginx=nginx:2"},
                 {"kubernetes.io/change-cause": "kubectl set image sts/foo nginx=nginx:2"},
                 id="change-cause is carried for rollout history"),
])
def test_new_revision_carries_set_annotations(annotations: dict[str, str] | None,
                                              want: dict[str, str] | None) -> None:
    """newRevision copies set.Annotations into the ControllerRevision (a copy: later edits of the set's stay out)."""
    set_ = new_set()
    if annotations is not None:
        set_["metadata"]["annotations"] = dict(annotations)
    revision = su.new_revision(set_, 1, None)
    assert revision["metadata"].get("annotations") == want
    if want:
        set_["metadata"]["annotations"]["later"] = "edit"
        assert revision["metadata"]["annotations"] == want


@pytest.mark.parametrize(("when_deleted", "when_scaled", "scaled_down", "want"), [
    pytest.param("Retain", "Retain", False, set(), id="retain"),
    pytest.param("Retain", "Retain", True, set(), id="retain, scaled down"),
    pytest.param("Delete", "Retain", False, {"set-uid"}, id="delete with set"),
    pytest.param("Delete", "Retain", True, {"set-uid"}, id="delete with set, scaled down"),
    pytest.param("Retain", "Delete", False, set(), id="delete with scaledown"),
    pytest.param("Retain", "Delete", True, {"pod-uid"}, id="delete with scaledown, scaled down"),
    pytest.param("Delete", "Delete", False, {"set-uid"}, id="delete with set and scaledown"),
    pytest.param("Delete", "Delete", True, {"pod-uid"}, id="delete with set and scaledown, scaled down"),
])
def test_update_claim_owner_ref_for_set_and_pod(when_deleted: str, when_scaled: str, scaled_down: bool,
                                                want: set[str]) -> None:
    """TestUpdateClaimOwnerRefForSetAndPod: from any starting owners, the policy's owners are reached."""
    set_ = new_set(3, when_deleted, when_scaled)
    pod = su.new_stateful_set_pod(set_, 5 if scaled_down else 1)
    pod["metadata"]["uid"] = "pod-uid"
    for start in ([], [{"uid": "set-uid"}], [{"uid": "pod-uid"}], [{"uid": "set-uid"}, {"uid": "pod-uid"}]):
        claim = {"metadata": {"name": "datadir-foo-1", "ownerReferences": copy.deepcopy(start)}}
        su.update_claim_owner_refs(claim, set_, pod)
        assert {r["uid"] for r in claim["metadata"]["ownerReferences"]} == want
        assert not su.update_claim_owner_refs(claim, set_, pod)  # already matching: no update needed


@pytest.mark.parametrize(("max_unavailable", "replicas", "want"), [
    pytest.param(None, 10, 1, id="case 0: unset is 1"),
    pytest.param(3, 10, 3, id="case 1: 3 of 10"),
    pytest.param(3, 0, 3, id="case 2: 3 of 0"),
    pytest.param(0, 0, 1, id="case 3: 0 is raised to 1"),
    pytest.param("10%", 25, 2, id="case 4: 10% of 25 rounds down"),
    pytest.param("100%", 5, 5, id="case 5: 100% of 5"),
    pytest.param("50%", 5, 2, id="case 6: 50% of 5 rounds down"),
    pytest.param("10%", 5, 1, id="case 7: 10% of 5 is raised to 1"),
    pytest.param("1%", 0, 1, id="case 8: 1% of 0"),
    pytest.param("0%", 0, 1, id="case 9: 0% of 0"),
])
def test_get_stateful_set_max_unavailable(max_unavailable: int | str | None, replicas: int, want: int) -> None:
    """TestGetStatefulSetMaxUnavailable."""
    set_ = new_set(replicas)
    set_["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    if max_unavailable is not None:
        set_["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = max_unavailable
    assert su.max_unavailable(set_) == want
