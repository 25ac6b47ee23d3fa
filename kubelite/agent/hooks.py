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
import socket
from typing import Any

import aiohttp

from kubelite.agent.umask import CONTAINER_UMASK
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


def _join_host_port(host: str, port: int) -> str:
    """Go's net.JoinHostPort: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _url(get: Obj, container: Obj, host: str) -> str:
    """The probe's URL as kubelet formats it (formatURL; path defaults to "/" as the API does)."""
    scheme = (get.get("scheme") or "HTTP").lower()
    return f"{scheme}://{_join_host_port(get.get('host') or host, _port(get, container))}{get.get('path') or '/'}"


def _dial_error(exc: BaseException, host: str, address: str) -> str | None:
    """Go's net.OpError text for a failed dial (`dial tcp 127.0.0.1:80: connect: connection refused`,
    `dial tcp: lookup nosuch: no such host`), None for an error that is not a dial's."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        exc = exc.os_error
    elif isinstance(exc, aiohttp.ClientError):  # after the connection was made (a read, the response)
        return None
    if isinstance(exc, socket.gaierror):
        return f"dial tcp: lookup {host}: no such host"
    if isinstance(exc, OSError) and exc.errno is not None:  # Go's syscall.Errno texts are glibc's, lower-cased
        return f"dial tcp {address}: connect: {os.strerror(exc.errno).lower()}"
    return None


def failure_message(exc: BaseException, handler: Obj, container: Obj, host: str) -> str:
    """What upstream's prober says of a handler that raised `exc` (pkg/probe/http and tcp return Go's error
    text: `Get "http://10.0.0.1:80/": dial tcp 10.0.0.1:80: connect: connection refused`); an error with no
    Go counterpart keeps its own text."""
    try:
        if "httpGet" in handler:
            get = handler["httpGet"] or {}
            dialed = _dial_error(exc, get.get("host") or host,
                                 _join_host_port(get.get("host") or host, _port(get, container)))
            closed = "EOF" if isinstance(exc, aiohttp.ServerDisconnectedError) else None  # no response at all
            return f'Get "{_url(get, container, host)}": {dialed or closed or exc}'
        if "tcpSocket" in handler:
            sock = handler["tcpSocket"] or {}
            return _dial_error(exc, sock.get("host") or host,
                               _join_host_port(sock.get("host") or host, _port(sock, container))) or str(exc)
    except ValueError:  # a port name the container does not have: that error's own text
        pass
    return str(exc)


def timeout_message(handler: Obj, container: Obj, host: str) -> str:
    """What upstream says of a handler that did not finish within the probe's timeoutSeconds: the exec
    runtime's DeadlineExceeded, Go's http.Client timeout, a dial's i/o timeout."""
    try:
        if "exec" in handler:
            return f'command "{" ".join((handler["exec"] or {}).get("command") or [])}" timed out'
        if "httpGet" in handler:
            return (f'Get "{_url(handler["httpGet"] or {}, container, host)}": context deadline exceeded '
                    "(Client.Timeout exceeded while awaiting headers)")
        if "tcpSocket" in handler:
            sock = handler["tcpSocket"] or {}
            return f"dial tcp {_join_host_port(sock.get('host') or host, _port(sock, container))}: i/o timeout"
    except ValueError as exc:
        return str(exc)
    return "timeout"


async def run_handler(handler: Obj, container: Obj, env: dict[str, str], host: str, clock: Clock) -> tuple[bool, str]:
    """(succeeded, message) for one handler; exceptions become failures with upstream's words for them."""
    try:
        if "exec" in handler:
            cmd = list((handler["exec"] or {}).get("command") or [])
            proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                                                        umask=CONTAINER_UMASK)  # the container's, not the agent's
            try:
                out, _ = await proc.communicate()
            except asyncio.CancelledError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                raise
            return proc.returncode == 0, out.decode(errors="replace")[-1024:]
        if "httpGet" in handler:
            get = handler["httpGet"] or {}
            headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
            async with aiohttp.ClientSession() as session, \
                    session.get(_url(get, container, host), headers=headers, ssl=False) as resp:
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
        return False, failure_message(exc, handler, container, host)
    return False, "no handler given"
