"""A throwaway `kubelite up --insecure` (control plane + agent) for benchmarks, reached over plain HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

from tests.conftest import free_port


@dataclass
class Up:
    session: aiohttp.ClientSession
    pid: int


@contextlib.asynccontextmanager
async def kubelite_up() -> AsyncIterator[Up]:
    """Start it in a temporary data dir, wait until its node is registered, stop it afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", "up", "--insecure", "--data-dir",
                                 f"{tmp}/data", "--port", str(port)], stdout=subprocess.DEVNULL)
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{port}",
                                             headers={"Content-Type": "application/json"}) as session:
                for _ in range(100):
                    try:
                        async with session.get("/api/v1/nodes") as resp:
                            if resp.status == 200 and (await resp.json())["items"]:
                                break
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.2)
                yield Up(session, proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
