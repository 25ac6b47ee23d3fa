"""DeleteOptions' propagation policy, as the finalizers the garbage collector acts on.

Mirrors the generic store's deletionFinalizersForGarbageCollection (k8s.io/apiserver
registry/generic/registry/store.go): a delete asking for `Orphan` puts the `orphan`
finalizer on the object (the collector strips its dependents' owner references, then
removes the finalizer), `Foreground` puts `foregroundDeletion` (the collector deletes the
dependents that block their owner's deletion first), `Background` — every kind's default —
puts neither and the object goes at once; the collector then deletes its dependents (a
batch/v1 Job's default is `Orphan`: the strategy's `orphans_by_default`). A policy given
explicitly replaces whichever of the two the object carried; without one, the object's
existing finalizer decides, then the kind's default. The legacy `orphanDependents` flag is honoured.
"""

from __future__ import annotations

from typing import Any

from kubelite.api import errors
from kubelite.api.errors import Cause

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
POLICIES = ("Orphan", "Background", "Foreground")

Obj = dict[str, Any]


def validate_options(options: Obj) -> None:
    """ValidateDeleteOptions: an unknown policy, or both ways of asking, is a 422 on DeleteOptions."""
    policy = options.get("propagationPolicy")
    causes = []
    if policy is not None and options.get("orphanDependents") is not None:
        causes.append(Cause("FieldValueInvalid", "Invalid value: \"null\": OrphanDependents and DeletionPropagation "
                                                 "cannot be both set", "propagationPolicy"))
    if policy is not None and policy not in POLICIES:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{policy}": supported values: '
                                                      + ", ".join(f'"{p}"' for p in POLICIES), "propagationPolicy"))
    if causes:
        raise errors.invalid("DeleteOptions", "", causes, "meta.k8s.io")


def _orphan(options: Obj, finalizers: list[str], by_default: bool) -> bool:
    """shouldOrphanDependents; `by_default`: the kind's DefaultGarbageCollectionPolicy is OrphanDependents."""
    if options.get("orphanDependents") is not None:
        return bool(options["orphanDependents"])
    policy = options.get("propagationPolicy")
    if policy is not None:
        return bool(policy == "Orphan")
    for f in finalizers:
        if f == ORPHAN:
            return True
        if f == FOREGROUND:
            return False
    return by_default


def _foreground(options: Obj, finalizers: list[str]) -> bool:
    """shouldDeleteDependents."""
    if options.get("orphanDependents") is not None:
        return False
    policy = options.get("propagationPolicy")
    if policy is not None:
        return bool(policy == "Foreground")
    return FOREGROUND in finalizers


def gc_finalizers(meta: Obj, options: Obj, orphans_by_default: bool) -> list[str] | None:
    """The object's finalizers after this delete, or None when they do not change."""
    current = list(meta.get("finalizers") or [])
    wanted = [f for f in current if f not in (ORPHAN, FOREGROUND)]
    if _orphan(options, current, orphans_by_default):
        wanted.append(ORPHAN)
    if _foreground(options, current):
        wanted.append(FOREGROUND)
    return None if set(wanted) == set(current) else wanted
