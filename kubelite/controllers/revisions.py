"""A Deployment's ReplicaSets by template and revision: the pod-template-hash, template equality, and the
revision and replica annotations (util/deployment_util.go, controller_utils.go ComputeHash)."""

from __future__ import annotations

from typing import Any

import orjson

from kubelite.api.strconv import int_or_none
from kubelite.controllers import rollout as ro
from kubelite.controllers.gojson import semantic

Obj = dict[str, Any]
SKIPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration", ro.REVISION, ro.REVISION_HISTORY,
                                 ro.DESIRED_REPLICAS, ro.MAX_REPLICAS, "deprecated.deployment.rollback.to"})
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """ComputeHash: FNV-32a of the template, then (when set) the collision count as upstream writes it (uint32,
    little-endian, in 8 bytes), the decimal sum spelled in rand's safe alphabet.

    Upstream hashes go-spew's dump of the Go struct (`DeepHashObject`); that dump spells Go type names, pointer
    nesting and every zero-valued field of the typed PodTemplateSpec, which a dict-based server does not have, so
    byte-for-byte parity is not practical. This hashes the canonical JSON (sorted keys) of the stored template
    instead: the same template always gives the same value (the server stores templates defaulted, so two
    spellings of one template agree), and values merely differ from upstream's — nothing outside the controller
    reads them, it only compares them with the label on its own ReplicaSets. A hash that clashes with a
    ReplicaSet of another template or owner is handled as upstream: collisionCount is bumped and the next sync
    hashes anew (DeploymentController._collision)."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4)
    value = str(_fnv32a(data))
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in value)


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _without_hash(template: Obj) -> Obj:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != ro.HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return {**template, "metadata": meta}


def equal_ignore_hash(t1: Obj, t2: Obj) -> bool:
    """EqualIgnoreHash: the templates are semantically equal but for the pod-template-hash label. Semantically,
    as upstream compares Go structs: `kubectl rollout undo` sends the old template back with
    `metadata.creationTimestamp: null`, which the API server keeps (a `metav1.Time` is written back as null),
    and a plain comparison took it for a new template — a new ReplicaSet instead of the old one reused."""
    return bool(semantic(_without_hash(t1)) == semantic(_without_hash(t2)))


def revision(rs: Obj) -> int:
    raw = (rs["metadata"].get("annotations") or {}).get(ro.REVISION, "")
    return int_or_none(raw) or 0  # deploymentutil.Revision: an unparseable one counts as none


def set_new_rs_annotations(d: Obj, rs: Obj, new_revision: int, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: the Deployment's annotations, the revision (kept if higher; the
    replaced one goes to revision-history), and for a new ReplicaSet the replica annotations."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for k, v in (d["metadata"].get("annotations") or {}).items():
        if k not in SKIPPED_ANNOTATIONS and annotations.get(k) != v:
            annotations[k] = v
            changed = True
    old = annotations.get(ro.REVISION)
    old_int = int_or_none(old or "") or 0
    if old_int < new_revision:
        annotations[ro.REVISION] = str(new_revision)
        changed = True
        if old is not None:
            history = annotations.get(ro.REVISION_HISTORY)
            annotations[ro.REVISION_HISTORY] = f"{history},{old}" if history else old
    if not exists:
        changed = set_replicas_annotations(rs, d) or changed
    return changed


def set_replicas_annotations(rs: Obj, d: Obj) -> bool:
    annotations = rs["metadata"].setdefault("annotations", {})
    want = {ro.DESIRED_REPLICAS: str(ro.replicas(d)), ro.MAX_REPLICAS: str(ro.replicas(d) + ro.max_surge(d))}
    if all(annotations.get(k) == v for k, v in want.items()):
        return False
    annotations.update(want)
    return True


