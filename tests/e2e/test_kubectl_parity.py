"""What kubectl v1.32 shows of the controllers' work, as against a real cluster (a QA pass found each of these
different): a real `kubelite up` (control plane + node agent running real processes), real kubectl."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, get_pod, sh, wait_for

pytestmark = pytest.mark.e2e
ROLLOUT_WAIT = ("--timeout=90s",)


def _json(up: ServerProcess, *args: str) -> Any:
    return json.loads(up.kubectl(*args, "-o", "json").stdout)


def _rolled_out(up: ServerProcess, deployment: str) -> None:
    up.kubectl("rollout", "status", f"deployment/{deployment}", *ROLLOUT_WAIT, timeout=120)


def test_rollout_undo_reuses_the_old_replica_set(up: ServerProcess) -> None:
    """create, set image, rollout undo: revision 1's ReplicaSet becomes revision 3 (`rollout history` lists 2 and 3,
    as upstream), though kubectl's patch sends the template back with `creationTimestamp: null`; and the
    Deployment's status has no `unavailableReplicas: 0` (an omitempty int32 upstream)."""
    up.kubectl("create", "deployment", "undo", "--image=busybox", "--", "sleep", "3600")
    _rolled_out(up, "undo")
    up.kubectl("set", "image", "deployment/undo", "busybox=busybox:1.36")
    _rolled_out(up, "undo")
    up.kubectl("rollout", "undo", "deployment/undo")
    _rolled_out(up, "undo")
    history = up.kubectl("rollout", "history", "deployment/undo").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"], history
    rss = _json(up, "get", "rs", "-l", "app=undo")["items"]
    assert sorted(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for rs in rss) == ["2", "3"]
    status = _json(up, "get", "deployment", "undo")["status"]
    assert status["availableReplicas"] == 1 and "unavailableReplicas" not in status, status
    up.kubectl("delete", "deployment", "undo", "--wait=false")


def _event_reasons(described: str) -> list[str]:
    """The Reason column of `kubectl describe`'s Events table, top to bottom (none yet: `Events:  <none>`)."""
    _, table, rows = described.partition("\nEvents:\n")
    return [row.split()[1] for row in rows.splitlines()[2:] if row.strip()] if table else []


def test_describe_lists_a_pods_events_in_the_order_they_happened(up: ServerProcess) -> None:
    """Scheduled, then the kubelet's Pulled, Created, Started: describe sorts by lastTimestamp (whole seconds) and
    keeps the list's order within a second, and the list is by name — `<pod>.<UnixNano in hex>`, as upstream."""
    apply_pod(up, "ordered", [sh("app", "sleep 3600")])
    assert wait_for(lambda: get_pod(up, "ordered").get("status", {}).get("phase") == "Running", timeout=60)
    assert wait_for(lambda: "Started" in _event_reasons(up.kubectl("describe", "pod", "ordered").stdout))
    reasons = _event_reasons(up.kubectl("describe", "pod", "ordered").stdout)
    lifecycle = [r for r in reasons if r in ("Scheduled", "Pulled", "Created", "Started")]
    assert lifecycle == sorted(lifecycle, key=["Scheduled", "Pulled", "Created", "Started"].index), reasons
    assert {"Scheduled", "Pulled", "Created", "Started"} <= set(lifecycle), reasons
    names = [e["metadata"]["name"] for e in _json(up, "get", "events", "--field-selector",
                                                      "involvedObject.name=ordered")["items"]]
    assert all(name.startswith("ordered.") and int(name.split(".")[1], 16) > 10**18 for name in names), names
    up.kubectl("delete", "pod", "ordered", "--wait=false")


def test_describe_ns_says_why_its_deletion_is_stuck(up: ServerProcess) -> None:
    """A Terminating namespace held by a finalizer on its content carries upstream's conditions, which
    `kubectl describe ns` prints; once the finalizer goes, so does the namespace."""
    up.kubectl("create", "namespace", "stuck")
    up.kubectl("create", "configmap", "held", "-n", "stuck")
    up.kubectl("patch", "configmap", "held", "-n", "stuck", "--type=merge",
               "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    up.kubectl("delete", "namespace", "stuck", "--wait=false")

    def conditions_shown() -> bool:
        described = up.kubectl("describe", "namespace", "stuck").stdout
        return "NamespaceFinalizersRemaining" in described and \
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances" \
            in described
    assert wait_for(conditions_shown, timeout=30), up.kubectl("describe", "namespace", "stuck").stdout
    conditions = {c["type"]: c for c in _json(up, "get", "namespace", "stuck")["status"]["conditions"]}
    assert conditions["NamespaceContentRemaining"]["message"] == \
        "Some resources are remaining: configmaps. has 1 resource instances"
    assert conditions["NamespaceDeletionDiscoveryFailure"]["reason"] == "ResourcesDiscovered"
    up.kubectl("patch", "configmap", "held", "-n", "stuck", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert wait_for(lambda: up.kubectl("get", "namespace", "stuck", check=False).returncode != 0, timeout=30)


def test_uncordon_leaves_no_empty_taints(up: ServerProcess) -> None:
    """cordon: the node lifecycle controller taints the node unschedulable; uncordon: it removes the taint, and
    with the last taint gone `spec.taints` goes too (omitempty upstream), not `taints: []`."""
    node = _json(up, "get", "nodes")["items"][0]["metadata"]["name"]

    def taint_keys() -> list[str]:
        return [t["key"] for t in _json(up, "get", "node", node)["spec"].get("taints") or []]
    up.kubectl("cordon", node)
    assert wait_for(lambda: "node.kubernetes.io/unschedulable" in taint_keys())
    up.kubectl("uncordon", node)
    assert wait_for(lambda: "taints" not in _json(up, "get", "node", node)["spec"]), \
        _json(up, "get", "node", node)["spec"]
