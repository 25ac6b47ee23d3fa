"""Exec round-trip latency: `kubectl exec POD -- true`, end to end, p50/p99.

Starts `kubelite up` (HTTPS, as a user runs it: kubectl → API server → agent over TLS with the
client certificate), runs a pod, then times N sequential `kubectl exec POD -- true` (each a new
kubectl process: WebSocket upgrade, splice, a sandboxed `true`, the exit status back). For scale,
the same number of `kubectl get pod POD` is timed too: the part of the figure that is kubectl's own
start-up and one API round trip.

    python -m benchmarks.exec [--runs 100]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.scheduler import pct
from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import apply_pod, pod_phase, sh, wait_for


def _timed(server: ServerProcess, runs: int, *args: str) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        server.kubectl(*args)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "home").mkdir()
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--data-dir", str(base / "data"),
                                 "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = ServerProcess(base / "data", port, proc, base / "home")
        try:
            assert wait_for(lambda: server.kubeconfig.exists() and
                            "Ready" in server.kubectl("get", "nodes", check=False).stdout, 60), "no node"
            apply_pod(server, "bench", [sh("main", "sleep 3600")], terminationGracePeriodSeconds=1)
            assert wait_for(lambda: pod_phase(server, "bench") == "Running", 60), "pod not running"
            server.kubectl("exec", "bench", "--", "true")  # warm up: first connections, caches
            exec_times = _timed(server, args.runs, "exec", "bench", "--", "true")
            get_times = _timed(server, args.runs, "get", "pod", "bench")
        finally:
            server.stop()
    for name, times in (("kubectl exec bench -- true", exec_times), ("kubectl get pod bench (baseline)", get_times)):
        p50, p99 = pct(times, 0.5) * 1000, pct(times, 0.99) * 1000
        print(f"{name:34s} runs={len(times)}  p50={p50:.0f} ms  p99={p99:.0f} ms")


if __name__ == "__main__":
    main()
