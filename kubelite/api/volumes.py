"""Volume matching shared by the PV controller, the scheduler's VolumeBinding and the agent.

A port of pkg/controller/volume/persistentvolume/util (FindMatchingVolume, CheckAccessModes,
CheckVolumeModeMismatches, IsVolumeBoundToClaim) and component-helpers' CheckNodeAffinity, over
plain API dicts, so the controller and the scheduler decide "does this volume fit this claim
(on this node)" the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubelite.api.quantity import QuantityError, parse_quantity
from kubelite.api.selectors import compile_label_selector

Obj = dict[str, Any]

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
LOCAL_PATH = "kubelite.io/local-path"
SHARED_PATH = "kubelite.io/shared-path"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def storage_class(obj: Obj) -> str:
    """GetPersistentVolumeClass / GetPersistentVolumeClaimClass: the beta annotation wins, as upstream."""
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    if ANN_BETA_CLASS in ann:
        return str(ann[ANN_BETA_CLASS])
    return str((obj.get("spec") or {}).get("storageClassName") or "")


def _storage(resources: Obj | None) -> Fraction:
    try:
        return parse_quantity((resources or {}).get("storage", 0))
    except QuantityError:
        return Fraction(0)


def requested(claim: Obj) -> Fraction:
    return _storage(((claim.get("spec") or {}).get("resources") or {}).get("requests"))


def capacity(pv: Obj) -> Fraction:
    return _storage((pv.get("spec") or {}).get("capacity"))


def access_modes_fit(claim: Obj, pv: Obj) -> bool:
    """CheckAccessModes: the volume offers every mode the claim asks for."""
    offered = set((pv.get("spec") or {}).get("accessModes") or [])
    return all(m in offered for m in (claim.get("spec") or {}).get("accessModes") or [])


def volume_mode_mismatch(claim: Obj, pv: Obj) -> bool:
    """CheckVolumeModeMismatches: unset means Filesystem on both sides."""
    return ((claim.get("spec") or {}).get("volumeMode") or "Filesystem") != \
        ((pv.get("spec") or {}).get("volumeMode") or "Filesystem")


def bound_to_claim(pv: Obj, claim: Obj) -> bool:
    """IsVolumeBoundToClaim: claimRef names the claim (and its uid, when the ref has one)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    meta = claim["metadata"]
    if not ref or ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def _requirement_matches(req: Obj, value: str | None) -> bool:
    op, values = req.get("operator"), [str(x) for x in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_selector_matches(selector: Obj | None, labels: Mapping[str, str], node_name: str) -> bool:
    """A NodeSelector: any term matches; a term matches when all its expressions and fields do (and is not empty)."""
    if selector is None:
        return True
    for term in selector.get("nodeSelectorTerms") or []:
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_requirement_matches(e, labels.get(e.get("key", ""))) for e in exprs) and all(
                _requirement_matches(f, node_name if f.get("key") == "metadata.name" else None) for f in fields):
            return True
    return False


def node_affinity_fits(pv: Obj, labels: Mapping[str, str], node_name: str) -> bool:
    """CheckNodeAffinity: the PV's required node affinity admits the node (no affinity: every node)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return required is None or node_selector_matches(required, labels, node_name)


def find_matching_volume(claim: Obj, volumes: Iterable[Obj], node: Obj | None = None,
                         excluded: set[str] | frozenset[str] = frozenset(), delay_binding: bool = False) -> Obj | None:
    """FindMatchingVolume: the volume pre-bound to the claim, else the smallest Available one that fits.

    With `node` (the scheduler's path) access modes and the node affinity are checked here; without it
    (the controller's path) a delayed-binding claim only takes a pre-bound volume.
    """
    want = requested(claim)
    selector_raw = (claim.get("spec") or {}).get("selector")
    selector = compile_label_selector(selector_raw) if selector_raw is not None else None
    cls = storage_class(claim)
    labels = (node or {}).get("metadata", {}).get("labels") or {}
    node_name = (node or {}).get("metadata", {}).get("name", "")
    best: Obj | None = None
    for pv in volumes:
        meta, spec = pv["metadata"], pv.get("spec") or {}
        if meta["name"] in excluded:
            continue
        if spec.get("claimRef") and not bound_to_claim(pv, claim):
            continue
        size = capacity(pv)
        if size < want or volume_mode_mismatch(claim, pv) or meta.get("deletionTimestamp"):
            continue
        affinity_ok = node is None or node_affinity_fits(pv, labels, node_name)
        if bound_to_claim(pv, claim):
            return pv if affinity_ok else None
        if node is None and delay_binding:
            continue
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(meta.get("labels") or {}):
            continue
        if storage_class(pv) != cls or not affinity_ok:
            continue
        if node is not None and not access_modes_fit(claim, pv):
            continue
        if best is None or capacity(best) > size:
            best = pv
    return best


def find_best_match(claim: Obj, volumes: Iterable[Obj], delay_binding: bool = False) -> Obj | None:
    """persistentVolumeOrderedIndex.findBestMatchForClaim: volumes grouped by their access-mode sets, the
    smallest sets that include every mode the claim asks for tried first."""
    wanted = set((claim.get("spec") or {}).get("accessModes") or [])
    groups: dict[frozenset[str], list[Obj]] = {}
    for pv in volumes:
        modes = frozenset((pv.get("spec") or {}).get("accessModes") or [])
        if wanted <= modes:
            groups.setdefault(modes, []).append(pv)
    for modes in sorted(groups, key=lambda m: (len(m), sorted(m))):
        match = find_matching_volume(claim, groups[modes], delay_binding=delay_binding)
        if match is not None:
            return match
    return None


def needs_attach(pv: Obj) -> bool:
    """A volume usable from one node at a time (ReadWriteOnce or ReadWriteOncePod): the attach lock guards it."""
    modes = (pv.get("spec") or {}).get("accessModes") or []
    return "ReadWriteOnce" in modes or "ReadWriteOncePod" in modes


def attachment_name(pv_name: str) -> str:
    """The VolumeAttachment of a volume: one name per volume, so creating it is the compare-and-swap (S5)."""
    return f"kubelite-{pv_name}"


def claim_names(pod: Obj) -> list[str]:
    """The claims a pod's volumes name (persistentVolumeClaim sources), in volume order."""
    return [vol["persistentVolumeClaim"]["claimName"] for vol in (pod.get("spec") or {}).get("volumes") or []
            if (vol.get("persistentVolumeClaim") or {}).get("claimName")]


# Reclaim policy Delete of a kubelite.io/local-path volume: only the node's agent reaches its directory, so
# the provisioner asks through the Node (its own rights already cover it: no new API and no new agent
# permission) and the agent answers there. Each annotation holds PV names separated by spaces.
ANN_LOCAL_PATH_DELETE = "kubelite.io/local-path-delete"  # set by the provisioner: directories to delete
ANN_LOCAL_PATH_DELETED = "kubelite.io/local-path-deleted"  # set by the agent: those deleted (or never made)


def annotation_names(obj: Obj | None, key: str) -> list[str]:
    """The PV names listed in annotation `key` of `obj`, in order, without duplicates."""
    value = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(key) or ""
    return list(dict.fromkeys(value.split()))


def pinned_node(pv: Obj) -> str | None:
    """The one node a local-path volume's node affinity names (as the provisioner writes it), if any."""
    for term in ((((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
                 .get("nodeSelectorTerms") or []):
        for expr in term.get("matchExpressions") or []:
            values = expr.get("values") or []
            if expr.get("key") == HOSTNAME_LABEL and expr.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None
