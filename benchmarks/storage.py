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
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cluster import kubelite_up
from benchmarks.scheduler import pct
from benchmarks.statefulset import start_set, stateful_set

SCS = "/apis/storage.k8s.io/v1/storageclasses"


def _set(name: str, n: int, volume: bool) -> dict[str, Any]:
    set_ = stateful_set(name, n)
    spec = set_["spec"]
    spec["podManagementPolicy"] = "Parallel"
    if volume:
        spec["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
            "resources": {"requests": {"storage": "1Gi"}}}}]
    return set_


async def run_set(session: aiohttp.ClientSession, name: str, n: int, volume: bool) -> None:
    run = await start_set(session, _set(name, n, volume))
    boot = [run.ready[p] - run.created[p] for p in run.ready]
    what = "with a local-path volume" if volume else "without volumes     "
    print(f"{n} pods {what}: all Ready after {max(run.ready.values()) - run.start:.1f} s; pod created -> Ready "
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
