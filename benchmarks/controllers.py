"""ReplicaSet scale-up benchmark: 0 → N pods created by the controller and bound by the scheduler.

A real `kubelite server` (SQLite store, controllers in-process over the in-process transport,
as `kubelite server` runs them) and a real `kubelite scheduler` process; bare nodes without
agents (nothing runs the pods). This process creates the nodes and a ReplicaSet of 0, then
patches its `scale` subresource to N and watches the pods: created/s is N over the time from
the scale request to the last pod seen created, bound/s the same to the last pod seen bound.
It also prints the CPU time the server and the scheduler spent meanwhile, per pod: on a shared,
loaded machine the rates mostly measure the load, while CPU per pod stays comparable.
kube-controller-manager's default client is limited to 20 QPS (burst 30); the aim is ≥ 1,000/s.

`--controller-only` isolates the controller and the API server's write path: one process, the
API server on SQLite and the ReplicaSet controller over the in-process transport, no scheduler,
no other controller; it prints created/s and the process's CPU per pod.

    python -m benchmarks.controllers [--replicas 5000] [--nodes 50] [--controller-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.scheduler import cpu_seconds, node, pod_events
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.controllers.replicaset import ReplicaSetController
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import start_server

Obj = dict[str, Any]
RS = "/apis/apps/v1/namespaces/default/replicasets"


def replicaset(name: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
                                           "terminationGracePeriodSeconds": 0}}}}


async def watch(session: aiohttp.ClientSession, rv: str, created: dict[str, float], bound: dict[str, float],
                want: int, done: asyncio.Event) -> None:
    async with contextlib.aclosing(pod_events(session, rv, done)) as events:
        async for now, _, obj in events:
            name = obj["metadata"]["name"]
            created.setdefault(name, now)
            if obj.get("spec", {}).get("nodeName"):
                bound.setdefault(name, now)
            if len(bound) >= want:
                done.set()
                return


async def run(session: aiohttp.ClientSession, replicas: int, nodes: int, pids: dict[str, int]) -> str:
    async def post(path: str, body: Obj) -> Obj:
        async with session.post(path, data=orjson.dumps(body)) as resp:
            out: Obj = orjson.loads(await resp.read())
            if resp.status != 201:
                raise RuntimeError(f"create failed {resp.status}: {out}")
            return out

    await asyncio.gather(*(post("/api/v1/nodes", node(f"node-{i}", pods="110")) for i in range(nodes)))
    rs = await post(RS, replicaset("bench"))
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()
    watcher = asyncio.create_task(watch(session, rs["metadata"]["resourceVersion"], created, bound, replicas, done))
    await asyncio.sleep(0.5)  # the watch is open before the clock starts
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    start = time.perf_counter()
    async with session.patch(f"{RS}/bench/scale", data=orjson.dumps({"spec": {"replicas": replicas}}),
                             headers={"Content-Type": "application/merge-patch+json"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"scale failed {resp.status}: {await resp.text()}")
    with contextlib.suppress(TimeoutError):  # report what was reached
        await asyncio.wait_for(done.wait(), timeout=max(120.0, replicas / 20))
    watcher.cancel()
    spent = {name: cpu_seconds(pid) - cpu[name] for name, pid in pids.items()}
    used = ", ".join(f"{name} {s:.1f} CPU-s ({s * 1000 / replicas:.2f} ms/pod)" for name, s in spent.items())
    last_created = max(created.values(), default=start) - start
    last_bound = max(bound.values(), default=start) - start
    return (f"ReplicaSet 0 -> {replicas} on {nodes} bare nodes: {len(created)} pods created in {last_created:.1f} s "
            f"({len(created) / last_created if last_created else 0:,.0f}/s), {len(bound)} bound in "
            f"{last_bound:.1f} s ({len(bound) / last_bound if last_bound else 0:,.0f}/s); {used}")


async def controller_only(replicas: int) -> str:
    """The ReplicaSet controller alone against an in-process API server (same process)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = await SQLiteStore.open(Path(tmp) / "state.db")
        server = ApiServer(store, RealClock())
        await server.start()
        client = InProcessClient(server)
        controller = ReplicaSetController(client, RealClock())
        task = asyncio.create_task(controller.run())
        try:
            await client.create(RS, replicaset("bench"))
            await controller.pods.synced.wait()
            start, cpu = time.perf_counter(), time.process_time()
            await client.patch(f"{RS}/bench/scale", {"spec": {"replicas": replicas}}, "application/merge-patch+json")
            while len(controller.pods.store) < replicas:
                await asyncio.sleep(0.01)
            took, spent = time.perf_counter() - start, time.process_time() - cpu
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await server.stop()
            await store.close()
    return (f"ReplicaSet controller alone, 0 -> {replicas}: created in {took:.1f} s ({replicas / took:,.0f}/s), "
            f"{spent:.1f} CPU-s ({spent * 1000 / replicas:.2f} ms/pod)")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, default=5000)
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--controller-only", action="store_true",
                   help="the ReplicaSet controller and an in-process API server alone, in this process")
    args = p.parse_args()
    if args.controller_only:
        print(await controller_only(args.replicas), flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "data", Path(tmp) / "home", insecure=True,
                              extra=["--disable", "scheduler"])
        sched = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "scheduler", "--kubeconfig",
                                  str(Path(tmp) / "data" / "kubeconfig"), "--seed", "1"])
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{server.port}",
                                             connector=aiohttp.TCPConnector(limit=50),
                                             headers={"Content-Type": "application/json"}) as session:
                pids = {"server": server.proc.pid, "scheduler": sched.pid}
                print(await run(session, args.replicas, args.nodes, pids), flush=True)
        finally:
            sched.terminate()
            sched.wait(10)
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
