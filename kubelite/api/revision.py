"""Which stored content of an object a copy of it shows."""

from __future__ import annotations

from typing import Any


def revision(obj: dict[str, Any]) -> tuple[object, object] | None:
    """(uid, resourceVersion): every write changes an object's resourceVersion, and an object deleted and created
    again has another uid, so two copies with the same pair show the same content — what a reader that saw one
    need not look through again. None for an object without a resourceVersion (never stored: a test's), whose
    content cannot be known again."""
    meta = obj.get("metadata") or {}
    version = meta.get("resourceVersion")
    return None if version is None else (meta.get("uid"), version)
