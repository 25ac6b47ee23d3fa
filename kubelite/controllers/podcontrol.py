"""What workload controllers share about their pods (controller_utils.go, as Jobs and StatefulSets use it).

A pod belongs to a controller through its controller ownerReference (the one with
`controller: true`); a new pod is stamped from the owner's template with that reference
(`blockOwnerDeletion`, so foreground deletion waits for it) and the template's labels,
annotations and spec. Conditions are set as upstream's helpers do: `lastTransitionTime`
moves only when the status changes.
"""

from __future__ import annotations

import copy
from typing import Any

from kubelite.clock import rfc3339
from kubelite.controllers import ownership

Obj = dict[str, Any]


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controlling owner, if any."""
    ref = ownership.controller_of(obj)
    return None if ref is None else str(ref.get("uid"))


def controller_of(obj: Obj, kind: str) -> str | None:
    """The name of the object's controlling owner when it is of `kind`."""
    ref = ownership.controller_of(obj)
    return str(ref.get("name")) if ref is not None and ref.get("kind") == kind else None


def pod_from_template(owner: Obj, ref: Obj, name: str = "", generate_name: str = "") -> Obj:
    """GetPodFromTemplate: labels, annotations and spec from the template, owned by `ref`."""
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": owner["metadata"].get("namespace", "default"),
                 "labels": dict(tmeta.get("labels") or {}), "annotations": dict(tmeta.get("annotations") or {}),
                 "ownerReferences": [ref]}
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


def has_condition(obj: Obj, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def set_condition(status: Obj, kind: str, value: str, reason: str, message: str, now: float) -> bool:
    """Set condition `kind` in `status`; returns whether anything changed."""
    conditions = status.setdefault("conditions", [])
    stamp = rfc3339(now)
    for c in conditions:
        if c.get("type") != kind:
            continue
        if (c.get("status"), c.get("reason"), c.get("message")) == (value, reason, message):
            return False
        if c.get("status") != value:
            c["lastTransitionTime"] = stamp
        c.update(status=value, reason=reason, message=message, lastProbeTime=stamp)
        return True
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastProbeTime": stamp, "lastTransitionTime": stamp})
    return True


def newest(cached: Obj | None, written: Obj | None) -> Obj | None:
    """The informer's copy of an object, or the copy our own last write returned when the informer has not
    caught up with it yet (same uid, higher resourceVersion): syncing from a stale status only conflicts."""
    if cached is None or written is None or written["metadata"].get("uid") != cached["metadata"].get("uid"):
        return cached
    try:
        stale = int(cached["metadata"]["resourceVersion"]) < int(written["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return cached
    return written if stale else cached
