"""The HTTP(S) transport of the client seam: bearer token, Status errors mapped back to ApiError.

Components never read another component's memory; they talk to the API server through a
`Client` only (DESIGN.md). Every failure below HTTP — a refused or reset connection, a body
cut short, a stalled server, a malformed reply — is translated once, by `map_exceptions`, into
`Unavailable` (as httpx's `map_exceptions` does at its transport boundary), and so is a 503;
callers catch one error and back off (`kubelite.client.retry`), whatever the network did.

A client may be given several API servers of one cluster (an HA control plane, README "Many
machines: several API servers"). It uses one at a time and moves to the next whenever the
current one fails that way: at once, within the same call, when the connection could not even
be made (nothing was sent, so any request may be retried), and for the caller's next try
otherwise (a request cut mid-way may have taken effect; the caller's retry decides). Watches
end with Unavailable like any request and are re-established by their informer, on the next
server. client-go has no such list (kubelet relies on a load balancer in front of the servers);
this is kubelite's stand-in for one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from kubelite.api.errors import ApiError, Unavailable, unavailable
from kubelite.api.transport import JSON, RestVerbs, status_error
from kubelite.api.transport import MERGE_PATCH as MERGE_PATCH  # re-exported: components import it from here

log = logging.getLogger("kubelite.client")
Obj = dict[str, Any]
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
CONNECT_TIMEOUT = 10.0
# A request (not a watch) whose server sends nothing for this long is given up as Unavailable:
# a SIGSTOPped server must not hang its clients. The API server answers every non-watch request
# from memory or one SQLite transaction, so this is generous.
READ_TIMEOUT = 30.0
# A watch that asked for bookmarks hears from the server at least every BOOKMARK_INTERVAL (20 s);
# silence for twice that plus slack means the connection or the server is gone (client-go's HTTP/2 health
# check: 30 s without a frame, then a 15 s ping), and the informer resumes, elsewhere if need be.
WATCH_READ_TIMEOUT = 45.0


def resource_path(plural: str, namespace: str = "", name: str = "", subresource: str = "",
                  group_version: str = "v1") -> str:
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


@contextlib.contextmanager
def map_exceptions() -> Iterator[None]:
    """Translate every transport-level failure raised inside the block into `Unavailable`, once."""
    try:
        yield
    except ApiError:
        raise
    except (aiohttp.ClientError, OSError, TimeoutError, asyncio.IncompleteReadError, orjson.JSONDecodeError,
            UnicodeDecodeError) as exc:
        # aiohttp.ClientError covers refused/reset connections (ClientConnectorError, ServerDisconnectedError)
        # and bodies cut short (ClientPayloadError); TimeoutError is a stall past the read timeout; a JSON
        # error here is a body truncated at a line boundary. None of them says anything about the objects.
        raise unavailable(f"the server is unavailable: {type(exc).__name__}: {exc}".rstrip(": ")) from exc


def server_list(servers: str | Sequence[str]) -> tuple[str, ...]:
    """The API server URLs of `servers`: one URL, a comma-separated list, or a sequence of URLs."""
    parts = servers.split(",") if isinstance(servers, str) else servers
    urls = tuple(u.strip().rstrip("/") for u in parts if u.strip())
    if not urls:
        raise ValueError("no API server URL given")
    return urls


def _never_sent(exc: Unavailable) -> bool:
    """Whether the failure happened before the request left: the connection was refused, unroutable, timed
    out or its TLS handshake failed. Only such a request may be retried elsewhere whatever its verb."""
    return isinstance(exc.__cause__, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)


class ApiClient(RestVerbs):
    def __init__(self, server: str | Sequence[str], token: str | None = None, ca_data: bytes | None = None,
                 connections: int = 100, read_timeout: float = READ_TIMEOUT,
                 watch_read_timeout: float = WATCH_READ_TIMEOUT,
                 client_cert: tuple[bytes, bytes] | None = None) -> None:
        self.servers = server_list(server)
        self._current = 0  # index in `servers` of the one in use
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=read_timeout)
        self._watch_timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT,
                                                    sock_read=watch_read_timeout)
        self._headers = {"Accept": JSON}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ssl: ssl.SSLContext | bool = False
        if ca_data:
            with tempfile.NamedTemporaryFile(suffix=".crt") as f:
                f.write(ca_data)
                f.flush()
                self._ssl = ssl.create_default_context(cafile=f.name)
        if client_cert is not None:  # a client certificate (PEM) and its key: the x509 identity (a node's)
            if self._ssl is False:
                self._ssl = ssl.create_default_context()
            self.use_client_certificate(*client_cert)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._reading: set[aiohttp.ClientResponse] = set()  # responses whose bodies are being read

    @property
    def server(self) -> str:
        """The URL of the API server in use."""
        return self.servers[self._current]

    @contextlib.contextmanager
    def _failing_over(self) -> Iterator[str]:
        """Yield the server in use; when the block fails with Unavailable (its transport failures mapped), the
        next call goes to the next server. Many calls in flight fail together when a server dies: only the
        first moves on, the others see that it already did."""
        at = self._current
        try:
            with map_exceptions():
                yield self.servers[at]
        except Unavailable:
            if len(self.servers) > 1 and self._current == at:
                self._current = (at + 1) % len(self.servers)
                log.warning("API server %s is unavailable; failing over to %s", self.servers[at], self.server)
            raise

    @classmethod
    def from_kubeconfig(cls, path: Path | str, connections: int = 100, servers: Sequence[str] = (),
                        bearer_token: str | None = None) -> ApiClient:
        """A client as the kubeconfig's current context says; `servers`, when given, replace its cluster's
        server (the `--server` flag of the components, which may list several); with `bearer_token`, its server
        and CA but that token as the user instead (a controller's service-account token, which must not ride
        with a client certificate)."""
        config = yaml.safe_load(Path(path).read_text())
        ctx_name = config.get("current-context")
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next((u["user"] for u in config.get("users", []) if u["name"] == ctx.get("user")),
                                    {})
        ca = cluster.get("certificate-authority-data")
        ca_data = base64.b64decode(ca) if ca else None
        if ca_data is None and cluster.get("certificate-authority"):
            ca_data = Path(cluster["certificate-authority"]).read_bytes()
        cert, key = user.get("client-certificate-data"), user.get("client-key-data")
        if cert is None and user.get("client-certificate"):
            cert = base64.b64encode(Path(user["client-certificate"]).read_bytes()).decode()
            key = base64.b64encode(Path(user["client-key"]).read_bytes()).decode()
        client_cert = (base64.b64decode(cert), base64.b64decode(key)) if cert and key else None
        if bearer_token is not None:
            return cls(servers or cluster["server"], bearer_token, ca_data, connections)
        return cls(servers or cluster["server"], user.get("token"), ca_data, connections, client_cert=client_cert)

    def use_client_certificate(self, cert: bytes, key: bytes) -> None:
        """Present this certificate (PEM) and key from the next TLS handshake on: a context reads its chain at each
        handshake, so a rotated certificate needs no new connector; open connections keep the old one until the
        caller closes them (close_connections)."""
        assert isinstance(self._ssl, ssl.SSLContext), "a client certificate needs TLS"
        with tempfile.NamedTemporaryFile(suffix=".crt") as crt, tempfile.NamedTemporaryFile(suffix=".key") as key_file:
            crt.write(cert)
            key_file.write(key)
            crt.flush()
            key_file.flush()
            self._ssl.load_cert_chain(crt.name, key_file.name)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers, connector=aiohttp.TCPConnector(limit=self._connections, ssl=self._ssl),
                timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        await self.close_connections()

    async def close_connections(self) -> None:
        """Close every connection of this client, idle or in flight, as kubelet's closeAllConns does when a
        heartbeat fails: a half-open connection (the server's side gone, ours never told) is otherwise found
        out only by its read timeout, 45 s for a watch. In-flight requests and watches fail at once with
        Unavailable, so their callers back off and retry; the next request opens a fresh connection."""
        session, self._session = self._session, None
        for resp in self._reading:
            # aiohttp's close detaches a connection's body reader before the connection is lost, so a
            # body being read would wait on forever: fail it here (a request still awaiting its
            # headers does fail, when its connection is lost)
            resp.content.set_exception(aiohttp.ClientConnectionError("connection closed by the client"))
        if session is not None:
            await session.close()

    @contextlib.contextmanager
    def _read(self, resp: aiohttp.ClientResponse) -> Iterator[aiohttp.ClientResponse]:
        """Register `resp` while its body is read, so that close_connections can fail the read."""
        self._reading.add(resp)
        try:
            yield resp
        finally:
            self._reading.discard(resp)

    async def request(self, method: str, path: str, body: Any = None, content_type: str = JSON,
                      params: Mapping[str, str] | None = None) -> Any:
        """One call; a server that could not be connected to is left for the next (each tried once)."""
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        untried = len(self.servers)
        while True:
            untried -= 1
            try:
                return await self._request_once(method, path, data, headers, params)
            except Unavailable as exc:
                if untried == 0 or not _never_sent(exc):
                    raise

    async def _request_once(self, method: str, path: str, data: bytes | None, headers: Mapping[str, str] | None,
                            params: Mapping[str, str] | None) -> Any:
        with self._failing_over() as server:
            async with self.session.request(method, server + path, data=data, headers=headers,
                                            params=params) as resp:
                with self._read(resp):
                    payload = await resp.read()
                out = orjson.loads(payload) if payload and resp.content_type == JSON else payload
            if resp.status >= 400:  # inside: a 503 (Unavailable) moves on to the next server too
                raise status_error(resp.status, out)
        return out

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        """Yield watch events until the server ends the stream; an ERROR event raises its Status.

        A stream cut mid-way (or silent past the watch read timeout, when bookmarks were asked
        for) raises Unavailable; a clean end of stream just returns, and the caller resumes.
        """
        query = {**params, "watch": "true"}
        timeout = self._watch_timeout if params.get("allowWatchBookmarks") == "true" else aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT)
        with self._failing_over() as server:
            async with self.session.get(server + path, params=query, timeout=timeout) as resp:
                if resp.status >= 400:
                    raise status_error(resp.status, orjson.loads(await resp.read() or b"{}"))
                buffer = b""
                with self._read(resp):
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            if not line:
                                continue
                            event: Obj = orjson.loads(line)
                            if event.get("type") == "ERROR":
                                raise status_error(int(event["object"].get("code", 500)), event["object"])
                            yield event
                if buffer.strip():
                    raise unavailable("the server ended the watch stream mid-event")

