"""Trace import: a `kubectl get pods,nodes -A -o json` snapshot or a Kubernetes audit log as a scenario.

A snapshot becomes node pools (nodes alike in capacity, labels and taints share a pool) and its live pods
as bare pods arriving at 0. An audit log (JSON lines, audit.k8s.io/v1 Events, as an API server writes
them with `--audit-log-path` at level Request or above) becomes its pod creations as bare pods arriving
when they were created, and its pod deletions as `delete` faults; its nodes, if any were created, as pools.
Pods keep what the scheduler and agent act on (resources, affinity, tolerations, spread, priority class,
grace period, restart policy); their containers run until stopped unless a run time is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from kubelite.clock import parse_rfc3339
from kubelite.sim.scenario import ScenarioError

Obj = dict[str, Any]
POD_FIELDS = ("affinity", "tolerations", "topologySpreadConstraints", "nodeSelector", "priorityClassName",
              "terminationGracePeriodSeconds", "restartPolicy", "schedulerName")
HOSTNAME = "kubernetes.io/hostname"
TAIL = 600.0  # simulated seconds after the last traced event
NO_NODES = [{"name": "node", "count": 3}]  # pools when the source has no nodes: 3 of the default capacity


def _pod_workload(pod: Obj, at: float, index: int) -> Obj:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    fragment: Obj = {k: spec[k] for k in POD_FIELDS if k in spec}
    fragment["containers"] = [{"name": c["name"], **({"resources": c["resources"]} if c.get("resources") else {})}
                              for c in spec.get("containers") or []]
    name = meta.get("name") or f"{meta.get('generateName', 'pod-')}{index}"
    return {"name": name, "kind": "Pod", "namespace": meta.get("namespace", "default"), "at": f"{at:g}s",
            "labels": meta.get("labels") or {"app": name}, "spec": fragment}


def _pools(nodes: Iterable[Obj]) -> list[Obj]:
    pools: dict[str, Obj] = {}
    for node in nodes:
        labels = {k: v for k, v in ((node.get("metadata") or {}).get("labels") or {}).items() if k != HOSTNAME}
        capacity = {k: v for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
                    if k in ("cpu", "memory", "pods", "ephemeral-storage")}
        taints = [t for t in (node.get("spec") or {}).get("taints") or []
                  if not t.get("key", "").startswith("node.kubernetes.io/")]  # the node controller's own
        key = orjson.dumps([capacity, labels, taints], option=orjson.OPT_SORT_KEYS).decode()
        if key not in pools:
            pools[key] = {"name": f"pool{len(pools)}", "count": 0, "capacity": capacity, "labels": labels,
                          "taints": taints}
        pools[key]["count"] += 1
    return list(pools.values())


def _priority_classes(pods: Iterable[Obj]) -> list[Obj]:
    seen: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        name = spec.get("priorityClassName")
        if name and not name.startswith("system-"):
            seen.setdefault(name, int(spec.get("priority") or 0))
    return [{"metadata": {"name": n}, "value": v} for n, v in sorted(seen.items())]


def from_snapshot(doc: Obj) -> Obj:
    items = doc.get("items") or []
    nodes = [i for i in items if i.get("kind") == "Node"]
    pods = [i for i in items if i.get("kind") == "Pod"
            and (i.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if not nodes and not pods:
        raise ScenarioError("the snapshot has no nodes and no live pods (`kubectl get pods,nodes -A -o json`)")
    return {"name": "snapshot", "duration": f"{TAIL:g}s", "nodePools": _pools(nodes) or NO_NODES,
            "priorityClasses": _priority_classes(pods),
            "workloads": [_pod_workload(p, 0.0, i) for i, p in enumerate(pods)]}


def from_audit_log(lines: Iterable[bytes], source: str) -> Obj:
    creates: list[tuple[float, Obj]] = []
    deletes: list[tuple[float, str]] = []
    nodes: list[Obj] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            ev = orjson.loads(line)
            ref = ev.get("objectRef") or {}
            code = (ev.get("responseStatus") or {}).get("code", 0)
            if ev.get("stage") != "ResponseComplete" or ref.get("subresource") or not 200 <= code < 300:
                continue
            t = parse_rfc3339(ev["requestReceivedTimestamp"])
        except (orjson.JSONDecodeError, KeyError, ValueError, AttributeError):
            raise ScenarioError(f"{source}:{number}: not an audit.k8s.io Event with requestReceivedTimestamp") \
                from None
        body = ev.get("responseObject") or ev.get("requestObject")
        if ev.get("verb") == "create" and ref.get("resource") == "pods" and body:
            creates.append((t, body))
        elif ev.get("verb") == "delete" and ref.get("resource") == "pods" and ref.get("name"):
            deletes.append((t, f"{ref.get('namespace', 'default')}/{ref['name']}"))
        elif ev.get("verb") == "create" and ref.get("resource") == "nodes" and body:
            nodes.append(body)
    if not creates:
        raise ScenarioError(f"{source}: no pod creations (the audit policy must log pods at level Request or above)")
    start = min(t for t, _ in creates)
    end = max([t for t, _ in creates] + [t for t, _ in deletes])
    workloads = [_pod_workload(p, round(t - start, 3), i) for i, (t, p) in enumerate(sorted(creates,
                                                                                            key=lambda c: c[0]))]
    names = {f"{w['namespace']}/{w['name']}" for w in workloads}
    return {"name": Path(source).stem, "duration": f"{end - start + TAIL:g}s",
            "nodePools": _pools(nodes) or NO_NODES,
            "priorityClasses": _priority_classes(p for _, p in creates), "workloads": workloads,
            "faults": [{"at": f"{t - start:g}s", "delete": ref} for t, ref in sorted(deletes) if ref in names]}


def _json_lines(data: bytes) -> bool:
    """Whether `data` reads as JSON lines (an audit log): its first non-blank line is a JSON object of its own."""
    first = next((line for line in data.splitlines() if line.strip()), b"")
    try:
        return isinstance(orjson.loads(first), dict)
    except orjson.JSONDecodeError:
        return False


def load(path: Path) -> Obj:
    """A scenario mapping (to write as YAML) from a snapshot (one JSON document) or an audit log (JSON lines)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if _json_lines(data):
            return from_audit_log(data.splitlines(), str(path))
        # One document that does not parse (a snapshot cut short, most often): where, not "not an audit Event".
        what = "truncated JSON (it ends early)" if exc.pos >= len(data.rstrip()) else f"invalid JSON: {exc.msg}"
        raise ScenarioError(f"{path}:{exc.lineno}:{exc.colno}: {what}; a `kubectl get -o json` snapshot is one "
                            "JSON document, an audit log one JSON object a line") from None
    if isinstance(doc, dict) and doc.get("kind") == "List":
        try:
            return from_snapshot(doc)
        except ScenarioError as exc:
            raise ScenarioError(f"{path}: {exc}") from None
    if isinstance(doc, dict) and doc.get("kind") == "Event":  # an audit log of one line
        return from_audit_log([data], str(path))
    raise ScenarioError(f"{path}: neither a `kubectl get -o json` List nor an audit log")
