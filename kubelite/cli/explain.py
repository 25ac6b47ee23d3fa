"""`kubelite explain pod NAME`: the scheduler's recorded verdict, and a fresh evaluation against the cluster now.

The fresh evaluation runs the same scheduler code (same profile and plugins) over nodes
and pods read through the API, as if the pod were unscheduled, and prints each node's
verdict per filter plugin and each score per score plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient, resource_path
from kubelite.clock import RealClock
from kubelite.scheduler import config as scheduler_config
from kubelite.scheduler.explain import API_VERSION
from kubelite.scheduler.podinfo import pod_info
from kubelite.scheduler.scheduler import Scheduler

Obj = dict[str, Any]
PER_NODE_LIMIT = 30


async def fresh_explanation(client: ApiClient, namespace: str, name: str, config_file: Path | None) -> Obj:
    sched = Scheduler(client, RealClock(), scheduler_config.load(config_file), seed=0)
    for informer in (sched.namespaces, *sched.owners.values(), sched.pdbs, sched.nodes, sched.pods):
        await informer.relist()
    pod = await client.get(resource_path("pods", namespace, name))
    sched.table.remove_pod(pod["metadata"].get("uid", ""))  # judge it as if it were not placed yet
    pod["spec"].pop("nodeName", None)
    info = pod_info(pod)
    profile = sched.profiles.get(pod["spec"].get("schedulerName", "default-scheduler"))
    if profile is None:
        raise SystemExit(f"kubelite: no scheduler profile named {pod['spec'].get('schedulerName')!r}")
    return sched.explain(sched.evaluate(profile, info), profile)


def render(doc: Obj, title: str) -> str:
    lines = [f"{title}: {doc['result']}" + (f" on {doc['node']}" if doc.get("node") else ""),
             f"  at {doc.get('time', '')}, {doc.get('nodes', 0)} node(s)"]
    if doc.get("message"):
        lines.append(f"  {doc['message']}")
    lines.append("  Filters:")
    for f in doc.get("filters", []):
        lines.append(f"    {f['plugin']}: {f['passed']} passed")
        for reason, rej in f["rejected"].items():
            shown = ", ".join(rej["nodes"][:PER_NODE_LIMIT])
            more = f" (+{rej['count'] - PER_NODE_LIMIT} more)" if rej["count"] > PER_NODE_LIMIT else ""
            lines.append(f"      {rej['count']} {reason}: {shown}{more}")
    if doc.get("scores"):
        lines.append("  Scores (best first):")
        for s in doc["scores"]:
            parts = ", ".join(f"{p}={v}" for p, v in s["plugins"].items())
            lines.append(f"    {s['node']}: {s['total']}  ({parts})")
    for hint in doc.get("suggestions") or []:
        lines.append(f"  Suggestion: {hint}")
    pre = doc.get("preemption")
    if pre:
        if pre.get("nominatedNode"):
            lines.append(f"  Preemption: nominated {pre['nominatedNode']} (decided by: {pre['decidedBy']})")
        else:
            lines.append(f"  Preemption: {pre.get('message', '')}")
        for c in pre.get("candidates", []):
            lines.append(f"    candidate {c['node']}: victims {', '.join(c['victims']) or '-'} "
                         f"(priorities {c['victimPriorities']}, PDB violations {c['pdbViolations']})")
    return "\n".join(lines)


async def explain_pod(kubeconfig: Path, namespace: str, name: str, config_file: Path | None) -> str:
    client = ApiClient.from_kubeconfig(kubeconfig)
    try:
        out = []
        try:
            recorded = await client.get(resource_path("schedulingexplanations", namespace, name,
                                                      group_version=API_VERSION))
            out.append(render(recorded, "Recorded by the scheduler"))
        except ApiError as exc:
            if exc.code != 404:
                raise
            out.append("Recorded by the scheduler: nothing (the pod was never found unschedulable)")
        out.append(render(await fresh_explanation(client, namespace, name, config_file), "Evaluated now"))
        return "\n\n".join(out)
    finally:
        await client.close()
