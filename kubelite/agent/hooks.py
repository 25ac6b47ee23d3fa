"""Lifecycle hooks and probe handlers: exec, httpGet, tcpSocket and sleep, each bounded by a timeout.

An exec handler runs the command as a separate process in the container's environment
(the process runtime has no namespaces to enter), and succeeds on exit code 0; a probe's httpGet
succeeds on a status in [200, 400), a hook's on any answer; tcpSocket on an accepted connection;
sleep after the given seconds. Every wait goes through the clock. Failures are worded as upstream
words them: Go's error texts for probes (pkg/probe), handlerRunner.Run's messages for hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.connector import Connection

from kubelite.agent.umask import CONTAINER_UMASK
from kubelite.api.validation import go_quote
from kubelite.clock import Clock

Obj = dict[str, Any]
# the two addresses of the connection an httpGet handler's request went out on, noted by _AddressedRequest for
# the call under way (each call sets its own list)
_ADDRESSES: ContextVar[list[str]] = ContextVar("kubelite_handler_addresses")


class BrokenConnection(Exception):
    """An established connection failed under the request, worded as Go's net.OpError for the read that saw it:
    `read tcp 127.0.0.1:54321->127.0.0.1:8080: read: connection reset by peer` (Transport.roundTrip returns the
    peek's error as is, golang/go#16465)."""


class _AddressedRequest(aiohttp.ClientRequest):
    """A request that notes its connection's local and remote address: Go's read error names both."""

    async def send(self, conn: Connection) -> aiohttp.ClientResponse:
        addresses, transport = _ADDRESSES.get(None), conn.transport
        ends = [transport.get_extra_info(end) for end in ("sockname", "peername")] if transport is not None else []
        if addresses is not None and len(ends) == 2 and all(ends):
            addresses[:] = [_join_host_port(*end[:2]) for end in ends]
        return await super().send(conn)


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
        return f"dial tcp {address}: connect: {errno_text(exc.errno)}"
    return None


def errno_text(errno: int) -> str:
    """Go's syscall.Errno text: glibc's strerror with its first letter lower-cased ("connection refused",
    "remote I/O error"), as Go's errors table has them."""
    reason = os.strerror(errno)
    return reason[:1].lower() + reason[1:]


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


async def _exec(cmd: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr) of `cmd` run to its end; a signal's death is 128 + the signal, as a runtime
    reports it. Cancelled: the command's whole process group is killed."""
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                start_new_session=True,
                                                umask=CONTAINER_UMASK)  # the container's, not the agent's
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    code = proc.returncode or 0
    return (128 - code if code < 0 else code), out, err


async def _http_get(get: Obj, container: Obj, host: str) -> int:
    """The status of one GET of the handler's URL, as Go's http.Client makes it: one request, not retried when its
    fresh connection fails (aiohttp would send it twice; Go retries only on a reused connection, which a new
    client never has). A failure after the connection was made is a BrokenConnection in Go's words."""
    headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
    addresses: list[str] = []
    token = _ADDRESSES.set(addresses)
    try:
        async with aiohttp.ClientSession(request_class=_AddressedRequest) as session:
            session._retry_connection = False  # as aiohttp's own test client does: no second request
            async with session.get(_url(get, container, host), headers=headers, ssl=False) as resp:
                return resp.status
    except aiohttp.ClientConnectorError:
        raise
    except aiohttp.ClientOSError as exc:
        if len(addresses) == 2 and exc.errno is not None:
            raise BrokenConnection(f"read tcp {addresses[0]}->{addresses[1]}: read: {errno_text(exc.errno)}") \
                from exc
        raise
    finally:
        _ADDRESSES.reset(token)


async def run_handler(handler: Obj, container: Obj, env: dict[str, str], host: str, clock: Clock) -> tuple[bool, str]:
    """(succeeded, message) of one probe handler; exceptions become failures with upstream's words for them. An
    exec's message is its output, stdout then stderr (the runtime's ExecSync result, as kubelet joins it)."""
    try:
        if "exec" in handler:
            code, out, err = await _exec(list((handler["exec"] or {}).get("command") or []), env)
            return code == 0, (out + err).decode(errors="replace")[-1024:]
        if "httpGet" in handler:
            status = await _http_get(handler["httpGet"] or {}, container, host)
            return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"
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
    except (OSError, ValueError, aiohttp.ClientError, BrokenConnection) as exc:
        return False, failure_message(exc, handler, container, host)
    return False, "no handler given"


async def run_hook(handler: Obj, container: Obj, env: dict[str, str], host: str, clock: Clock, pod: str) -> str:
    """kubelet's handlerRunner.Run for a lifecycle hook of `container` in `pod` (format.Pod's `name_ns(uid)`): ""
    when it succeeded, else upstream's message. Unlike a probe, an httpGet hook succeeds on any answer (upstream
    reads no status code, kubernetes/kubernetes#56963), and tcpSocket is no handler a hook runs."""
    failed = f"for Container {go_quote(str(container.get('name', '')))} in Pod {go_quote(pod)} failed - error:"
    if "exec" in handler:
        cmd = list((handler["exec"] or {}).get("command") or [])
        try:
            code, out, err = await _exec(cmd, env)
        except OSError as exc:  # the command could not be started: no output
            return f'Exec lifecycle hook ([{" ".join(cmd)}]) {failed} {exc}, message: ""'
        if code == 0:
            return ""
        # the runtime's CodeExitError (`command '…' exited with N: <stderr>`), then the output it returned
        return (f"Exec lifecycle hook ([{' '.join(cmd)}]) {failed} command '{' '.join(cmd)}' exited with {code}: "
                f"{err.decode(errors='replace')}, message: {go_quote((out + err).decode(errors='replace'))}")
    if "httpGet" in handler:
        get = handler["httpGet"] or {}
        try:
            await _http_get(get, container, host)
        except (OSError, ValueError, aiohttp.ClientError, BrokenConnection) as exc:
            return f"HTTP lifecycle hook ({get.get('path') or '/'}) {failed} " \
                   f"{failure_message(exc, handler, container, host)}"
        return ""
    if "sleep" in handler:
        await clock.sleep(float((handler["sleep"] or {}).get("seconds", 0)))
        return ""
    return f"Cannot run handler: invalid handler: {handler}"
