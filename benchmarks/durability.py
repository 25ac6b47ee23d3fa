"""Durability and watch fan-out under load, against real `kubelite server` processes (issue 10).

Two workloads, shared by this command (which prints figures) and tests/e2e/test_durability.py
(which runs them small and asserts):

- `kill_cycles`: writers create pods without pause while the server is SIGKILLed and restarted
  `kills` times; afterwards every acknowledged (201) create must be in the store.
- `fan_out`: `watchers` watches of all pods while `writers` writers each patch their own pod
  (a counter annotation) `patches` times per round. Every watcher must see every counter value
  of every pod, in order (a gap is a lost event); the server's RSS is read after a warm-up round
  and after the last, with the object count constant. The watch cache's ring grows with the
  writes whoever watches, so the same run with one watcher is the baseline: what 50 add is fan-out.

    python -m benchmarks.durability [--writers 20] [--kills 3] [--watchers 50] [--patches 100] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import start_server
from tests.e2e.writers import PODS, AcknowledgedCreates, stored_pods


def _pod(name: str) -> bytes:
    return orjson.dumps({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})


@dataclass(frozen=True)
class KillResult:
    kills: int
    acknowledged: int
    lost: int
    seconds: float


def kill_cycles(base: Path, writers: int, kills: int, run_for: float) -> KillResult:
    """SIGKILL the server `kills` times, each after `run_for` seconds of writes, restarting it on the same data."""
    data, home = base / "data", base / "home"
    server = start_server(data, home, insecure=True)
    port = server.port
    started = time.monotonic()
    with AcknowledgedCreates(port, writers) as load:
        for _ in range(kills):
            time.sleep(run_for)
            server.proc.send_signal(signal.SIGKILL)  # while writes are in flight
            server.proc.wait(timeout=10)
            server = start_server(data, home, port=port, insecure=True)
        time.sleep(run_for / 2)
    try:
        stored = stored_pods(port, timeout=30)
    finally:
        server.stop()
    return KillResult(kills, len(load.acked), len(load.missing(stored)), time.monotonic() - started)


@dataclass(frozen=True)
class FanOutResult:
    watchers: int
    writers: int
    events: int  # events each watcher had to see
    lost: int  # events missing at any watcher (gaps in a pod's counter), summed over watchers
    seconds: float  # the measured rounds
    rss_warm_mib: float
    rss_end_mib: float


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _fan_out(port: int, pid: int, watchers: int, writers: int, patches: int, rounds: int) -> FanOutResult:
    base = f"http://127.0.0.1:{port}"
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(base, headers=headers,
                                     connector=aiohttp.TCPConnector(limit=watchers + writers + 4)) as session:
        for w in range(writers):
            async with session.post(PODS, data=_pod(f"f{w}")) as resp:
                assert resp.status == 201, await resp.text()
        async with session.get(PODS) as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        seen: list[dict[str, int]] = [{} for _ in range(watchers)]
        gaps = [0] * watchers

        async def watch(i: int) -> None:
            async with session.get(f"{PODS}?watch=1&resourceVersion={rv}",
                                   timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
                async for line in resp.content:
                    event = orjson.loads(line)
                    meta = event["object"]["metadata"]
                    count, last = int((meta.get("annotations") or {}).get("n", "0")), seen[i].get(meta["name"], 0)
                    if count == last:
                        continue  # another writer's change (the scheduler's status of an unschedulable pod)
                    if count != last + 1:
                        gaps[i] += 1
                    seen[i][meta["name"]] = count

        async def write(w: int, first: int) -> None:
            for n in range(first, first + patches):
                body = orjson.dumps({"metadata": {"annotations": {"n": str(n)}}})
                async with session.patch(f"{PODS}/f{w}", data=body,
                                         headers={"Content-Type": "application/merge-patch+json"}) as resp:
                    assert resp.status == 200, await resp.text()

        async def settle(expected: int) -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                    sum(s.values()) < expected for s in seen):  # the sum of last counters: all seen when equal
                await asyncio.sleep(0.05)

        tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
        rss_warm = 0.0
        started = 0.0
        for r in range(rounds):
            if r == 1:
                rss_warm, started = _rss_mib(pid), time.monotonic()
            await asyncio.gather(*(write(w, r * patches + 1) for w in range(writers)))
            await settle(writers * (r + 1) * patches)  # each pod's last counter is (r + 1) * patches
        elapsed = time.monotonic() - started
        rss_end = _rss_mib(pid)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        expected = writers * rounds * patches
        lost = sum(gaps) + sum(max(0, expected - sum(s.values())) for s in seen)
        return FanOutResult(watchers, writers, expected, lost, elapsed, rss_warm, rss_end)


def fan_out(base: Path, watchers: int, writers: int, patches: int, rounds: int) -> FanOutResult:
    """`rounds` ≥ 2: the first warms the server up (caches, allocator) and is not measured."""
    server = start_server(base / "data", base / "home", insecure=True)
    try:
        return asyncio.run(_fan_out(server.port, server.proc.pid, watchers, writers, patches, rounds))
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writers", type=int, default=20)
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--run-for", type=float, default=3.0, help="seconds of writes before each SIGKILL")
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--patches", type=int, default=100, help="patches per writer per round")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        k = kill_cycles(Path(tmp) / "kill", args.writers, args.kills, args.run_for)
        print(f"SIGKILL under {args.writers} writers: {k.kills} kills, {k.acknowledged:,} acknowledged creates, "
              f"{k.lost} lost ({k.seconds:.1f} s)")
        base = fan_out(Path(tmp) / "one", 1, args.writers, args.patches, args.rounds)
        f = fan_out(Path(tmp) / "fan", args.watchers, args.writers, args.patches, args.rounds)
        delivered = f.watchers * f.writers * args.patches * (args.rounds - 1)
        print(f"watch fan-out: {f.watchers} watchers x {f.writers} writers, {f.events:,} events each: {f.lost} lost; "
              f"measured rounds {delivered:,} deliveries in {f.seconds:.1f} s ({delivered / f.seconds:,.0f}/s); "
              f"server RSS {f.rss_warm_mib:.1f} MiB after warm-up, {f.rss_end_mib:.1f} MiB at the end "
              f"({f.rss_end_mib - f.rss_warm_mib:+.1f} MiB; with 1 watcher {base.rss_end_mib - base.rss_warm_mib:+.1f} "
              "MiB: the watch cache's ring)")


if __name__ == "__main__":
    main()
