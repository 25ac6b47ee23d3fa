"""StatefulSet benchmark: OrderedReady startup of N pods with a real agent.

Starts `kubelite up --insecure` (control plane with the controllers in-process, and the agent
as its child), creates a StatefulSet of N pods (`sleep 3600`, no readiness probe: a pod is Ready
once its container runs) and watches its pods. OrderedReady creates web-k only after web-(k-1)
is Running and Ready, so the total is N times (controller reaction + pod startup); both parts are
printed: reaction = web-(k-1) Ready → web-k created, startup = web-k created → web-k Ready.

    python -m benchmarks.statefulset [--pods 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cluster import kubelite_up
from benchmarks.scheduler import pct

PODS = "/api/v1/namespaces/default/pods"
STS = "/apis/apps/v1/namespaces/default/statefulsets"


def stateful_set(name: str, n: int) -> dict[str, Any]:
    """A StatefulSet `name` of n `sleep 3600` pods labelled app=`name` (no readiness probe: Ready once running)."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": {
        "replicas": n, "serviceName": name, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}}}


def _ready(pod: dict[str, object]) -> bool:
    status = pod.get("status") or {}
    assert isinstance(status, dict)
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


async def _watch(session: aiohttp.ClientSession, app: str, rv: str, n: int, created: dict[str, float],
                 ready: dict[str, float]) -> None:
    async with session.get(f"{PODS}?watch=true&labelSelector=app%3D{app}&resourceVersion={rv}",
                           timeout=aiohttp.ClientTimeout(total=None)) as resp:
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            now = time.perf_counter()
            for line in lines:
                pod = orjson.loads(line)["object"]
                name = pod["metadata"]["name"]
                created.setdefault(name, now)
                if name not in ready and _ready(pod):
                    ready[name] = now
            if len(ready) == n:
                return


@dataclass(frozen=True)
class Startup:
    """When (perf_counter) the set was created, and each pod was first seen and became Ready."""

    start: float
    created: dict[str, float]
    ready: dict[str, float]


async def start_set(session: aiohttp.ClientSession, set_: dict[str, Any]) -> Startup:
    """Create `set_` and watch its pods until all its replicas are Ready."""
    name, n = set_["metadata"]["name"], set_["spec"]["replicas"]
    rv = (await (await session.get(f"{PODS}?limit=1")).json())["metadata"]["resourceVersion"]
    created: dict[str, float] = {}
    ready: dict[str, float] = {}
    watcher = asyncio.create_task(_watch(session, name, rv, n, created, ready))
    start = time.perf_counter()
    async with session.post(STS, data=orjson.dumps(set_)) as resp:
        assert resp.status == 201, await resp.text()
    await asyncio.wait_for(watcher, 60 + n * 5)
    return Startup(start, created, ready)


async def startup(session: aiohttp.ClientSession, n: int) -> None:
    run = await start_set(session, stateful_set("web", n))
    created, ready = run.created, run.ready
    total = max(ready.values()) - run.start
    order = sorted(created, key=created.__getitem__)
    assert order == [f"web-{i}" for i in range(n)], order
    reaction = [created[f"web-{i}"] - ready[f"web-{i - 1}"] for i in range(1, n)]
    boot = [ready[f"web-{i}"] - created[f"web-{i}"] for i in range(n)]
    print(f"StatefulSet of {n} pods, OrderedReady, one node: all Ready after {total:.1f} s "
          f"({total / n * 1000:.0f} ms per pod); controller reaction (predecessor Ready -> pod created) "
          f"p50 {pct(reaction, 0.5) * 1000:.0f} ms, p99 {pct(reaction, 0.99) * 1000:.0f} ms; "
          f"pod startup (created -> Ready) p50 {pct(boot, 0.5) * 1000:.0f} ms, p99 {pct(boot, 0.99) * 1000:.0f} ms",
          flush=True)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=100)
    args = p.parse_args()
    async with kubelite_up() as up:
        await startup(up.session, args.pods)


if __name__ == "__main__":
    asyncio.run(main())
