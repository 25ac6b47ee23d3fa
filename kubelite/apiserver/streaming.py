"""pods/exec, pods/attach, pods/portforward: the upgraded connection spliced through to the node's agent.

As kube-apiserver's UpgradeAwareHandler: the request is checked here (the pod exists and is not
finished, the container is valid, exec has a command, at least one stream is asked for), then
sent on to the agent (over TLS with the API server's client certificate, never the caller's
token) with its upgrade headers; the agent's answer goes back as it is — an error Status, or
`101 Switching Protocols` after which the bytes are copied both ways unchanged until either side
closes. The API server never parses the streaming protocol (WebSocket channels, SPDY tunnelled in
WebSocket for port-forward): whatever kubectl and the agent negotiate works through it.

A SPDY upgrade (kubectl's fallback when the WebSocket upgrade fails) is spliced the same way:
aiohttp itself switches protocols for WebSocket only, but once the response is 101 the
connection's bytes are taken over (`set_parser`) whatever the upgrade was; kubectl sends nothing
before that response.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from kubelite.api import errors
from kubelite.apiserver import node_connection
from kubelite.apiserver.logs import pick_container
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.pods import PODS, TERMINAL_PHASES
from kubelite.apiserver.request import Target
from kubelite.apiserver.rest import Registry

SUBRESOURCES = ("exec", "attach", "portforward")
# what the agent needs of the client's upgrade request (its credentials stay here)
_FORWARDED = ("Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Protocol",
              "X-Stream-Protocol-Version")
_RETURNED = ("Upgrade", "Connection", "Sec-WebSocket-Accept", "Sec-WebSocket-Protocol", "X-Stream-Protocol-Version")
CONNECT_TIMEOUT = 10.0
MAX_HEAD = 64 * 1024
PAUSE_ABOVE = 1024 * 1024  # bytes queued towards the agent before the client's side stops being read
READ_SIZE = 64 * 1024


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "t")


def agent_path(request: web.Request, pod: Obj, target: Target) -> tuple[str, str]:
    """Validate the request as upstream's ExecREST/AttachREST/PortForwardREST: the agent's path for it, and
    what it reaches (for messages)."""
    ns, name = target.namespace, target.name
    phase = (pod.get("status") or {}).get("phase")
    if phase in TERMINAL_PHASES:
        raise errors.bad_request(f"cannot exec into or attach to a container in a completed pod; "
                                 f"current phase is {phase}")
    if target.subresource == "portforward":
        return f"/portForward/{ns}/{name}", f'pod "{name}"'
    container = pick_container(pod, request.query.get("container"))
    if target.subresource == "exec" and not request.query.getall("command", []):
        raise errors.bad_request("you must specify at least 1 command")
    if not any(_flag(request, s) for s in ("stdin", "stdout", "stderr")):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    return f"/{target.subresource}/{ns}/{name}/{container}", f'container "{container}" in pod "{name}"'


async def proxy(request: web.Request, registry: Registry, tls: ssl.SSLContext, target: Target) -> web.StreamResponse:
    if request.method not in ("GET", "POST"):
        raise errors.method_not_allowed(request.method, f"pods/{target.subresource}")
    pod = registry.current(PODS, target.namespace, target.name)
    path, what = agent_path(request, pod, target)
    agent = node_connection.endpoint(registry, pod, what)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(agent.host, agent.port, ssl=tls),
                                                CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise errors.ApiError(503, "ServiceUnavailable", f"the node agent on {agent.node} is unreachable: {exc}") \
            from None
    try:
        raw = request.rel_url.raw_query_string
        query = f"?{raw}" if raw else ""
        head = [f"{request.method} {path}{query} HTTP/1.1", f"Host: {agent.host}:{agent.port}"]
        head += [f"{k}: {v}" for k in _FORWARDED for v in request.headers.getall(k, [])]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        status, headers = await _response_head(reader)
        if status != 101:  # the agent's refusal (a Status), passed on
            length = headers.get("Content-Length", "")
            try:
                body = await reader.readexactly(int(length)) if length.isdigit() else await reader.read(MAX_HEAD)
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                raise errors.ApiError(503, "ServiceUnavailable", f"the node agent's answer was cut short: {exc}") \
                    from None
            return web.Response(status=status, body=body,
                                content_type=headers.get("Content-Type", "text/plain").split(";")[0])
        resp = web.StreamResponse(status=101, reason="Switching Protocols",
                                  headers=CIMultiDict((k, v) for k in _RETURNED for v in headers.getall(k, [])))
        resp.force_close()
        await resp.prepare(request)
        await _splice(request, reader, writer)
        return resp
    finally:
        writer.close()


async def _response_head(reader: asyncio.StreamReader) -> tuple[int, CIMultiDict[str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as exc:
        raise errors.ApiError(503, "ServiceUnavailable", f"the node agent answered no HTTP response: {exc}") \
            from None
    lines = raw.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise errors.ApiError(503, "ServiceUnavailable", "the node agent answered no HTTP response") from None
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.add(name.strip(), value.strip())
    return status, headers


class _ToAgent:
    """Takes the place of aiohttp's reader on the client's upgraded connection: its bytes go to the agent."""

    def __init__(self, client: asyncio.Transport, agent: asyncio.StreamWriter) -> None:
        self.client, self.agent = client, agent
        self.draining: asyncio.Task[None] | None = None

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self.agent.is_closing():
            self.agent.write(data)
            if self.agent.transport.get_write_buffer_size() > PAUSE_ABOVE and self.draining is None:
                self.client.pause_reading()
                self.draining = asyncio.ensure_future(self._drain())
        return False, b""

    async def _drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self.agent.drain()
        self.draining = None
        if not self.client.is_closing():
            self.client.resume_reading()

    def feed_eof(self) -> None:
        if not self.agent.is_closing():
            self.agent.close()


async def _splice(request: web.Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy bytes both ways until the agent's side ends (the client's end closes the agent's side)."""
    client = request.transport
    protocol: Any = request.protocol
    if client is None:
        return
    protocol.set_parser(_ToAgent(client, writer))
    try:
        while chunk := await reader.read(READ_SIZE):
            if client.is_closing():
                break
            client.write(chunk)
            if client.get_write_buffer_size() > PAUSE_ABOVE:
                await protocol._drain_helper()  # the client is slow: stop reading the agent until it catches up
    except ConnectionError:
        pass
    finally:
        client.close()
