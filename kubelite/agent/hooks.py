"""Lifecycle hooks and probe handlers: exec, httpGet, tcpSocket and sleep, each bounded by a timeout.

An exec handler runs the command as a separate process in the container's environment
(the process runtime has no namespaces to enter), and succeeds on exit code 0; httpGet
succeeds on a status in [200, 400); tcpSocket on an accepted connection; sleep after the
given seconds. Every wait goes through the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

import aiohttp

from kubelite.clock import Clock

Obj = dict[str, Any]


def _port(handler: Obj, container: Obj) -> int:
    port = handler.get("port")
    if isinstance(port, str) and not port.isdigit():
        for p in container.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"no port named {port!r}")
    return int(port or 0)


async def run_handler(handler: Obj, container: Obj, env: dict[str, str], host: str, clock: Clock) -> tuple[bool, str]:
    """(succeeded, message) for one handler; exceptions become failures with their text."""
    try:
        if "exec" in handler:
            cmd = list((handler["exec"] or {}).get("command") or [])
            proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT, start_new_session=True)
            try:
                out, _ = await proc.communicate()
            except asyncio.CancelledError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                raise
            return proc.returncode == 0, out.decode(errors="replace")[-1024:]
        if "httpGet" in handler:
            get = handler["httpGet"] or {}
            scheme = (get.get("scheme") or "HTTP").lower()
            url = f"{scheme}://{get.get('host') or host}:{_port(get, container)}{get.get('path') or '/'}"
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=False) as resp:
                return 200 <= resp.status < 400, f"HTTP probe failed with statuscode: {resp.status}"
        if "tcpSocket" in handler:
            sock = handler["tcpSocket"] or {}
            _, writer = await asyncio.open_connection(sock.get("host") or host, _port(sock, container))
            writer.close()
            return True, ""
        if "sleep" in handler:
            await clock.sleep(float((handler["sleep"] or {}).get("seconds", 0)))
            return True, ""
        if "grpc" in handler:
            return False, "grpc handlers are not supported"
    except (OSError, ValueError, aiohttp.ClientError) as exc:
        return False, str(exc)
    return False, "no handler given"
