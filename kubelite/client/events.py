"""Building core/v1 Events about an object, as client-go's event recorder does."""

from __future__ import annotations

import secrets
from typing import Any

from kubelite.clock import rfc3339

Obj = dict[str, Any]


def event_for(obj: Obj, reason: str, message: str, kind: str, component: str, now: float,
              event_type: str = "Normal", host: str = "", action: str = "") -> Obj:
    meta = obj["metadata"]
    stamp = rfc3339(now)
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    ev: Obj = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"kind": kind, "namespace": meta.get("namespace", ""), "name": meta["name"],
                           "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", "v1"),
                           "resourceVersion": meta.get("resourceVersion", "")},
        "reason": reason, "message": message, "type": event_type, "source": source,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": component, "reportingInstance": host or component,
    }
    if action:
        ev["action"] = action
    return ev
