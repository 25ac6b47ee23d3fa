"""Node failure → taint latency: how long after a node's last heartbeat its NoExecute taint lands.

Starts `kubelite server --insecure --node-monitor-grace-period G` and two `kubelite agent`s
(node-a, node-b) on this machine. Each round waits for node-a to renew its Lease (seen by polling
every 20 ms), SIGSTOPs it right after, and records when the API shows Ready=Unknown and the
`node.kubernetes.io/unreachable:NoExecute` taint; then SIGCONTs it and records when it is Ready
and untainted again. The aim is taint ≤ grace + 1 s after the last heartbeat.

    python -m benchmarks.node_failure [--grace 15] [--rounds 3] [--lease-seconds 40]

Round 1 comes seconds after the nodes registered: it shows whether a new node's first renewals count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.api.errors import ApiError
from kubelite.client.http import ApiClient
from tests.conftest import start_server

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-a"
POLL = 0.02


async def _until(client: ApiClient, path: str, test: Any, timeout: float = 120.0) -> tuple[float, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            obj = await client.get(path)
        except ApiError as exc:
            if exc.code != 404:  # not registered yet
                raise
        else:
            if test(obj):
                return time.monotonic(), obj
        await asyncio.sleep(POLL)
    raise TimeoutError(path)


def _ready(node: Any) -> str:
    return next((c["status"] for c in node.get("status", {}).get("conditions") or [] if c["type"] == "Ready"), "")


def _no_execute(node: Any) -> bool:
    return any(t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute"
               for t in node.get("spec", {}).get("taints") or [])


async def _round(client: ApiClient, pid: int) -> tuple[float, float, float]:
    await _until(client, "/api/v1/nodes/node-a", lambda n: _ready(n) == "True" and not n["spec"].get("taints"))
    _, lease = await _until(client, LEASE, lambda lease: True)  # a node can be Ready before its first renewal
    version = lease["metadata"]["resourceVersion"]
    renewed, _ = await _until(client, LEASE, lambda lease: lease["metadata"]["resourceVersion"] != version)
    os.kill(pid, signal.SIGSTOP)
    unknown, _ = await _until(client, "/api/v1/nodes/node-a", lambda n: _ready(n) == "Unknown")
    tainted, _ = await _until(client, "/api/v1/nodes/node-a", _no_execute)
    os.kill(pid, signal.SIGCONT)
    cont = time.monotonic()
    back, _ = await _until(client, "/api/v1/nodes/node-a", lambda n: _ready(n) == "True" and not _no_execute(n))
    return unknown - renewed, tainted - renewed, back - cont


async def main(grace: float, rounds: int, lease_seconds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        node_config = base / "node.yaml"
        node_config.write_text(f"kind: KubeletConfiguration\nnodeLeaseDurationSeconds: {lease_seconds}\n")
        server = start_server(base / "data", base / "home", insecure=True,
                              extra=["--node-monitor-grace-period", str(grace)])
        agents = [subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig",
                                    str(server.kubeconfig), "--node-name", name, "--data-dir", str(base / name),
                                    "--node-config", str(node_config)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for name in ("node-a", "node-b")]
        client = ApiClient.from_kubeconfig(server.kubeconfig)
        try:
            for node in ("node-a", "node-b"):
                await _until(client, f"/api/v1/nodes/{node}", lambda n: _ready(n) == "True")
            print(f"grace period {grace:.1f} s; times after node-a's last Lease renewal")
            for i in range(rounds):
                unknown, tainted, back = await _round(client, agents[0].pid)
                print(f"round {i + 1}: Ready=Unknown +{unknown:.2f} s, unreachable:NoExecute +{tainted:.2f} s "
                      f"(grace + {tainted - grace:.2f} s); recovered {back:.2f} s after SIGCONT")
        finally:
            await client.close()
            for proc in agents:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                proc.wait(timeout=30)
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=float, default=15.0,
                        help="node-monitor-grace-period (above the renewal period, a quarter of the Lease)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lease-seconds", type=int, default=40, help="the agents' nodeLeaseDurationSeconds")
    args = parser.parse_args()
    asyncio.run(main(args.grace, args.rounds, args.lease_seconds))
