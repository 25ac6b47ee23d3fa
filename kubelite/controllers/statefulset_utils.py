"""StatefulSet identities, storage, revisions and claim ownership (pkg/controller/statefulset/stateful_set_utils.go).

A StatefulSet pod's identity is its ordinal: name `<set>-<ordinal>`, hostname the same, subdomain
the governing service, labels `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`.
Its storage is one PVC per `volumeClaimTemplates` entry, named `<template>-<set>-<ordinal>`, so
a replacement pod finds the same claims. Each template version is a ControllerRevision named
`<set>-<hash>`; pods carry the revision name in `controller-revision-hash`.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from kubelite.api.strconv import int_or_none
from kubelite.clock import parse_rfc3339
from kubelite.controllers import ownership, rollout
from kubelite.controllers import podcontrol as pc
from kubelite.controllers.gojson import semantic
from kubelite.controllers.podutil import is_pod_ready

Obj = dict[str, Any]
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
HASH_LABEL = "controller.kubernetes.io/hash"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alikes


# --- identity ---------------------------------------------------------------------------------------


def parent_and_ordinal(pod: Obj) -> tuple[str, int]:
    """getParentNameAndOrdinal: ("", -1) when the name has no ordinal."""
    m = _ORDINAL.match(pod["metadata"].get("name", ""))
    if m is None:
        return "", -1
    return m.group(1), int(m.group(2))


def get_ordinal(pod: Obj) -> int:
    return parent_and_ordinal(pod)[1]


def pod_name(set_: Obj, ordinal: int) -> str:
    return f"{set_['metadata']['name']}-{ordinal}"


def start_ordinal(set_: Obj) -> int:
    return int(((set_.get("spec") or {}).get("ordinals") or {}).get("start", 0))


def end_ordinal(set_: Obj) -> int:
    return start_ordinal(set_) + int(set_["spec"].get("replicas", 1)) - 1


def in_ordinal_range(pod: Obj, set_: Obj) -> bool:
    ordinal = get_ordinal(pod)
    return start_ordinal(set_) <= ordinal <= end_ordinal(set_)


def is_member_of(set_: Obj, pod: Obj) -> bool:
    return parent_and_ordinal(pod)[0] == str(set_["metadata"]["name"])


def identity_matches(set_: Obj, pod: Obj) -> bool:
    """identityMatches: the pod's name, namespace and pod-name label are those of its ordinal."""
    parent, ordinal = parent_and_ordinal(pod)
    meta = pod["metadata"]
    return (ordinal >= 0 and parent == set_["metadata"]["name"] and meta["name"] == pod_name(set_, ordinal)
            and meta.get("namespace") == set_["metadata"].get("namespace")
            and (meta.get("labels") or {}).get(POD_NAME_LABEL) == meta["name"])


def update_identity(set_: Obj, pod: Obj) -> None:
    """updateIdentity + initIdentity: name, namespace, labels, hostname and subdomain of the pod's ordinal."""
    ordinal = get_ordinal(pod)
    meta = pod["metadata"]
    meta["name"] = pod_name(set_, ordinal)
    meta["namespace"] = set_["metadata"].get("namespace", "default")
    labels = meta.setdefault("labels", {})
    labels[POD_NAME_LABEL] = meta["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)
    spec = pod.setdefault("spec", {})
    spec["hostname"] = meta["name"]
    if set_["spec"].get("serviceName"):
        spec["subdomain"] = set_["spec"]["serviceName"]


# --- storage ----------------------------------------------------------------------------------------


def claim_name(set_: Obj, template: Obj, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{set_['metadata']['name']}-{ordinal}"


def pod_claims(set_: Obj, pod: Obj) -> dict[str, Obj]:
    """getPersistentVolumeClaims: volume name → the claim the pod's ordinal uses, labelled with the set's selector."""
    ordinal = get_ordinal(pod)
    selector = ((set_["spec"].get("selector") or {}).get("matchLabels")) or {}
    out: dict[str, Obj] = {}
    for template in set_["spec"].get("volumeClaimTemplates") or []:
        claim = copy.deepcopy(template)
        meta = claim.setdefault("metadata", {})
        meta["name"] = claim_name(set_, template, ordinal)
        meta["namespace"] = set_["metadata"].get("namespace", "default")
        meta["labels"] = {**(meta.get("labels") or {}), **selector}
        claim.pop("status", None)
        claim.update(apiVersion="v1", kind="PersistentVolumeClaim")
        out[template["metadata"]["name"]] = claim
    return out


def update_storage(set_: Obj, pod: Obj) -> None:
    """updateStorage: one volume per claim template, pointing at this ordinal's claim; other volumes kept."""
    claims = pod_claims(set_, pod)
    spec = pod.setdefault("spec", {})
    volumes = [{"name": name, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
               for name, claim in claims.items()]
    volumes += [vol for vol in spec.get("volumes") or [] if vol.get("name") not in claims]
    if volumes:
        spec["volumes"] = volumes


def storage_matches(set_: Obj, pod: Obj) -> bool:
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    for name, claim in pod_claims(set_, pod).items():
        source = (volumes.get(name) or {}).get("persistentVolumeClaim") or {}
        if source.get("claimName") != claim["metadata"]["name"]:
            return False
    return True


def new_stateful_set_pod(set_: Obj, ordinal: int) -> Obj:
    """newStatefulSetPod: the template stamped with the ordinal's identity and storage."""
    ref = ownership.controller_ref(set_, "apps/v1", "StatefulSet")
    pod = pc.pod_from_template(set_, ref, name=pod_name(set_, ordinal))
    update_identity(set_, pod)
    update_storage(set_, pod)
    return pod


def new_versioned_pod(current_set: Obj, update_set: Obj, current_rev: str, update_rev: str, ordinal: int) -> Obj:
    """newVersionedStatefulSetPod: ordinals below the partition stay at the current revision."""
    strategy = current_set["spec"].get("updateStrategy") or {}
    partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0))
    if strategy.get("type", "RollingUpdate") == "RollingUpdate" and ordinal < start_ordinal(current_set) + partition:
        pod = new_stateful_set_pod(current_set, ordinal)
        pod["metadata"]["labels"][REVISION_LABEL] = current_rev
        return pod
    pod = new_stateful_set_pod(update_set, ordinal)
    pod["metadata"]["labels"][REVISION_LABEL] = update_rev
    return pod


def pod_revision(pod: Obj) -> str:
    return str((pod["metadata"].get("labels") or {}).get(REVISION_LABEL, ""))


# --- pod state --------------------------------------------------------------------------------------


def is_created(pod: Obj) -> bool:
    return bool((pod.get("status") or {}).get("phase"))


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod)


def is_running_and_available(pod: Obj, min_ready: int, now: float) -> bool:
    """podutil.IsPodAvailable for a running pod: Ready for at least minReadySeconds."""
    if not is_running_and_ready(pod):
        return False
    if min_ready <= 0:
        return True
    ready = pc.condition(pod, "Ready") or {}
    since = ready.get("lastTransitionTime")
    return isinstance(since, str) and parse_rfc3339(since) + min_ready <= now


def is_healthy(pod: Obj) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


def is_unavailable(pod: Obj, min_ready: int, now: float) -> bool:
    """isUnavailable: not available (Ready for minReadySeconds), or terminating."""
    return not is_running_and_available(pod, min_ready, now) or is_terminating(pod)


def max_unavailable(set_: Obj) -> int:
    """getStatefulSetMaxUnavailable: `rollingUpdate.maxUnavailable` (default 1) of the replicas, a percentage
    rounded down, and never below 1 (a small percentage would otherwise stop the update)."""
    value = ((set_["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable")
    return max(1, rollout.scaled_value(1 if value is None else value, int(set_["spec"].get("replicas", 1)), False))


# --- revisions --------------------------------------------------------------------------------------


def revision_patch(set_: Obj) -> Obj:
    """getPatch: the template, to be applied with `$patch: replace`."""
    template = copy.deepcopy(set_["spec"].get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def hash_revision(data: Obj, collision_count: int | None) -> str:
    """history.HashControllerRevision: fnv32a of the data (and the collision count), safe-encoded."""
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        raw += str(collision_count).encode()
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in str(_fnv32a(raw)))


def new_revision(set_: Obj, number: int, collision_count: int | None) -> Obj:
    """newRevision: a ControllerRevision of the set's template, owned by the set, carrying the set's annotations (so
    `kubectl rollout history statefulset` shows the kubernetes.io/change-cause the set had at that revision)."""
    data = revision_patch(set_)
    digest = hash_revision(data, collision_count)
    labels = dict(((set_["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {})
    labels[HASH_LABEL] = digest
    meta: Obj = {"name": f"{set_['metadata']['name']}-{digest}",
                 "namespace": set_["metadata"].get("namespace", "default"), "labels": labels,
                 "ownerReferences": [ownership.controller_ref(set_, "apps/v1", "StatefulSet")]}
    if set_["metadata"].get("annotations"):  # an empty map is omitted, as upstream's omitempty would
        meta["annotations"] = dict(set_["metadata"]["annotations"])
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": data, "revision": number}


def apply_revision(set_: Obj, revision: Obj) -> Obj:
    """ApplyRevision: the set as it was at `revision` (its template replaced)."""
    out = copy.deepcopy(set_)
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    out["spec"]["template"] = template
    return out


def equal_revision(a: Obj, b: Obj) -> bool:
    """history.EqualRevision: semantically equal data (the set's template, null and absent alike, as in the Go
    struct upstream serialises), unless both hash labels are decimal int32s that differ — upstream parses the
    label with ParseInt, which a safe-encoded hash only rarely passes."""
    ha, hb = (int_or_none((r["metadata"].get("labels") or {}).get(HASH_LABEL, ""), 32) for r in (a, b))
    if ha is not None and hb is not None and ha != hb:
        return False
    return bool(semantic(a.get("data")) == semantic(b.get("data")))


# --- claim ownership (persistentVolumeClaimRetentionPolicy) ------------------------------------------


def _has_owner(claim: Obj, owner: Obj) -> bool:
    return any(r.get("uid") == owner["metadata"].get("uid") for r in claim["metadata"].get("ownerReferences") or [])


def _set_owner(claim: Obj, owner: Obj, api_version: str, kind: str) -> bool:
    if _has_owner(claim, owner):
        return False
    claim["metadata"].setdefault("ownerReferences", []).append(
        {"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]})
    return True


def _remove_owner(claim: Obj, owner: Obj) -> bool:
    if not _has_owner(claim, owner):
        return False
    claim["metadata"]["ownerReferences"] = [r for r in claim["metadata"]["ownerReferences"]
                                            if r.get("uid") != owner["metadata"].get("uid")]
    return True


def update_claim_owner_refs(claim: Obj, set_: Obj, pod: Obj) -> bool:
    """updateClaimOwnerRefForSetAndPod: owner references so the garbage collector deletes a claim with its set
    (whenDeleted: Delete) or with its pod once the pod's ordinal is scaled away (whenScaled: Delete)."""
    policy = set_["spec"].get("persistentVolumeClaimRetentionPolicy") or {}
    when_deleted, when_scaled = policy.get("whenDeleted", "Retain"), policy.get("whenScaled", "Retain")
    scaled_down = not in_ordinal_range(pod, set_)
    changed = False
    if when_scaled == "Delete" and scaled_down:
        changed |= _remove_owner(claim, set_)
        changed |= _set_owner(claim, pod, "v1", "Pod")
        return changed
    changed |= _remove_owner(claim, pod)
    if when_deleted == "Delete":
        changed |= _set_owner(claim, set_, "apps/v1", "StatefulSet")
    else:
        changed |= _remove_owner(claim, set_)
    return changed
