"""Node-agent benchmark: pod startup latency, SIGKILL timing after the grace period, idle CPU.

Starts `kubelite up --insecure` (the control plane, and the agent as its child process) and
drives it over HTTP:
1. startup: N pods (`sleep 3600`) created at once; latency = create → every container
   running, as observed by a watch;
2. SIGKILL timing: pods that ignore SIGTERM with a 2 s grace are deleted; the error is
   (object removed - DELETE sent) - grace, i.e. how late the kill and confirmation come;
3. idle CPU: the agent's and the control plane's CPU over 10 s with the N pods running, after
   5 s for the start-up burst's tail (queued events) to settle.

    python -m benchmarks.agent [--pods 100] [--kill-pods 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.cluster import kubelite_up
from benchmarks.scheduler import cpu_seconds, pct
from tests.e2e.pods import agent_pid

PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, script: list[str], grace: int = 30) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                         "spec": {"terminationGracePeriodSeconds": grace,
                                  "containers": [{"name": "main", "image": "busybox", "command": script}]}})


async def _running_times(session: aiohttp.ClientSession, rv: str, names: set[str], out: dict[str, float]) -> None:
    async with session.get(f"{PODS}?watch=true&resourceVersion={rv}",
                           timeout=aiohttp.ClientTimeout(total=None)) as resp:
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                obj = orjson.loads(line)["object"]
                name = obj["metadata"]["name"]
                statuses = (obj.get("status") or {}).get("containerStatuses") or []
                if name in names and name not in out and statuses and all("running" in s["state"]
                                                                            for s in statuses):
                    out[name] = time.perf_counter()
            if len(out) == len(names):
                return


async def startup(session: aiohttp.ClientSession, n: int) -> None:
    rv = (await (await session.get(f"{PODS}?limit=1")).json())["metadata"]["resourceVersion"]
    names = {f"start-{i}" for i in range(n)}
    running: dict[str, float] = {}
    watcher = asyncio.create_task(_running_times(session, rv, names, running))
    created: dict[str, float] = {}

    async def create(name: str) -> None:
        created[name] = time.perf_counter()
        async with session.post(PODS, data=_pod(name, ["sleep", "3600"])) as resp:
            assert resp.status == 201, await resp.text()

    await asyncio.gather(*(create(name) for name in names))
    await asyncio.wait_for(watcher, 120)
    lat = [running[n] - created[n] for n in names]
    print(f"startup: {n} pods created at once on one node: all running after {max(lat):.2f} s; "
          f"latency p50 {pct(lat, 0.5) * 1000:.0f} ms, p99 {pct(lat, 0.99) * 1000:.0f} ms")


async def kill_timing(session: aiohttp.ClientSession, n: int) -> None:
    names = [f"stubborn-{i}" for i in range(n)]
    for name in names:
        async with session.post(PODS, data=_pod(name, ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
                                                grace=2)) as resp:
            assert resp.status == 201
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = (await (await session.get(PODS)).json())["items"]
        if sum(1 for p in pods if p["metadata"]["name"] in names and p["status"].get("phase") == "Running") == n:
            break
        await asyncio.sleep(0.2)
    errors = []

    async def delete(name: str) -> None:
        start = time.perf_counter()
        async with session.delete(f"{PODS}/{name}", data=b"{}") as resp:
            assert resp.status == 200
        while True:
            async with session.get(f"{PODS}/{name}") as resp:
                if resp.status == 404:
                    break
            await asyncio.sleep(0.01)
        errors.append(time.perf_counter() - start - 2.0)
        if errors[-1] < 0:
            print(f"  {name} removed {-errors[-1]:.2f} s before its grace period ended", flush=True)

    await asyncio.gather(*(delete(name) for name in names))
    print(f"SIGKILL timing: {n} pods ignoring SIGTERM, grace 2 s: removal after grace + "
          f"p50 {pct(errors, 0.5) * 1000:.0f} ms, p99 {pct(errors, 0.99) * 1000:.0f} ms, "
          f"min {min(errors) * 1000:.0f} ms")


async def idle_cpu(pid: int, n: int) -> None:
    agent = agent_pid(pid)
    await asyncio.sleep(5)  # the burst's tail (queued events, first probes) settles first
    before, t0 = (cpu_seconds(agent), cpu_seconds(pid)), time.perf_counter()
    await asyncio.sleep(10)
    elapsed = time.perf_counter() - t0
    used = [(cpu_seconds(p) - b) / elapsed for p, b in zip((agent, pid), before, strict=True)]
    print(f"idle CPU with {n} running pods: agent {used[0] * 100:.1f} % of a core, control plane "
          f"{used[1] * 100:.1f} %")


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=100)
    p.add_argument("--kill-pods", type=int, default=20)
    args = p.parse_args()
    async with kubelite_up() as up:
        await startup(up.session, args.pods)
        await idle_cpu(up.pid, args.pods)
        for i in range(args.pods):  # make room: the node admits at most 110 pods
            async with up.session.delete(f"{PODS}/start-{i}", data=b'{"gracePeriodSeconds":0}') as resp:
                await resp.read()
        await kill_timing(up.session, args.kill_pods)


if __name__ == "__main__":
    asyncio.run(main())
