"""Storage benchmark: what a persistent volume adds to a pod's startup.

Starts `kubelite up --insecure` (control plane with the controllers in-process, the agent as its
child) and a `kubelite.io/local-path` StorageClass (WaitForFirstConsumer), then a StatefulSet of N
pods (`podManagementPolicy: Parallel`, `sleep 3600`) with one volumeClaimTemplate, and the same
StatefulSet without it. Every pod with a volume goes through the whole path: the scheduler's
VolumeBinding selects the node and waits in PreBind, the provisioner creates the PV, the binder
binds it, the attach/detach controller creates the VolumeAttachment and marks it attached, the
agent reads claim, volume and attachment, creates the directory and binds it into the container.
Printed: pod created → Ready (p50/p99) with and without the volume, and the time to all Ready.

    python -m benchmarks.storage [--pods 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cluster import kubelite_up
from benchmarks.scheduler import pct
from benchmarks.statefulset import _ready

PODS = "/api/v1/namespaces/default/pods"
STS = "/apis/apps/v1/namespaces/default/statefulsets"
SCS = "/apis/storage.k8s.io/v1/storageclasses"


def _set(name: str, n: int, volume: bool) -> bytes:
    container: dict[str, Any] = {"name": "c", "image": "busybox", "command": ["sleep", "3600"]}
    spec: dict[str, Any] = {
        "replicas": n, "serviceName": name, "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}}
    if volume:
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
            "resources": {"requests": {"storage": "1Gi"}}}}]
    return orjson.dumps({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec})


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


async def run_set(session: aiohttp.ClientSession, name: str, n: int, volume: bool) -> None:
    rv = (await (await session.get(f"{PODS}?limit=1")).json())["metadata"]["resourceVersion"]
    created: dict[str, float] = {}
    ready: dict[str, float] = {}
    watcher = asyncio.create_task(_watch(session, name, rv, n, created, ready))
    start = time.perf_counter()
    async with session.post(STS, data=_set(name, n, volume)) as resp:
        assert resp.status == 201, await resp.text()
    await asyncio.wait_for(watcher, 60 + n * 5)
    boot = [ready[p] - created[p] for p in ready]
    what = "with a local-path volume" if volume else "without volumes     "
    print(f"{n} pods {what}: all Ready after {max(ready.values()) - start:.1f} s; pod created -> Ready "
          f"p50 {pct(boot, 0.5) * 1000:.0f} ms, p99 {pct(boot, 0.99) * 1000:.0f} ms", flush=True)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=30)
    args = p.parse_args()
    async with kubelite_up() as up:
        async with up.session.post(SCS, data=orjson.dumps({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                "provisioner": "kubelite.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"})) as resp:
            assert resp.status == 201, await resp.text()
        await run_set(up.session, "plain", args.pods, volume=False)
        await run_set(up.session, "vol", args.pods, volume=True)


if __name__ == "__main__":
    asyncio.run(main())
