"""The fuzz harness's child processes: the API server under test, and the `/readyz` probe.

Each runs in its own process, as `kubelite serve` does: the fuzzer's own memory (Hypothesis keeps a tree of
every choice it made, 550,000 objects after 5,000 examples) then neither pauses the server in the fuzzer's
garbage collections nor counts in the server's, and the probe is paused by neither process's collector.

    python -m tests.fuzz.child server <state.db> <summary.json>   # prints its port, serves until SIGTERM
    python -m tests.fuzz.child probe <port> <summary.json>        # GETs /readyz every 20 ms until SIGTERM

On SIGTERM each writes its measurements as JSON: the server its full collections once started (wall and CPU
time, objects walked), the probe every latency.
"""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from kubelite.apiserver import gc_tuning
from kubelite.apiserver.app import ApiServer
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore

PROBE_EVERY = 0.02


class FullCollections:
    """Times each generation-2 collection (wall and CPU) and counts the objects it walked."""

    def __init__(self) -> None:
        self.pauses: list[dict[str, float]] = []
        self._started = (0.0, 0.0, 0)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = (time.perf_counter(), time.process_time(), len(gc.get_objects()))
        else:
            wall, cpu, objects = self._started
            self.pauses.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                                "objects": objects})


async def serve(db: Path, summary: Path) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    store = await SQLiteStore.open(db)
    server = ApiServer(store, RealClock())
    await server.start()
    gc_tuning.start_serving()  # as `kubelite serve` does
    collections = FullCollections()  # those while serving
    gc.callbacks.append(collections)
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await stop.wait()
    await runner.cleanup()
    await server.stop()
    await store.close()
    summary.write_text(json.dumps({"full_collections": collections.pauses}))


def probe(port: int, summary: Path) -> None:
    halt = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: halt.set())
    latencies: list[float] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not halt.wait(PROBE_EVERY):
        started = time.perf_counter()
        conn.request("GET", "/readyz")
        conn.getresponse().read()
        latencies.append(time.perf_counter() - started)
    conn.close()
    summary.write_text(json.dumps({"latencies": latencies}))


def main(argv: list[str]) -> Any:
    mode, arg, summary = argv
    if mode == "server":
        return asyncio.run(serve(Path(arg), Path(summary)))
    return probe(int(arg), Path(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
