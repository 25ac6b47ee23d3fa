"""The agent's HTTPS endpoint (kubelet's server): a route table, TLS, and who may call it.

As kubelet with --anonymous-auth=false and --client-ca-file: the endpoint serves TLS and every
route but /healthz needs a client certificate signed by the cluster CA (the API server presents
one, `pki.ensure_agent_client`); anyone else gets 401 Unauthorized. The CA is --client-ca-file,
else the CA of the agent's kubeconfig. Without a serving certificate given, the agent signs its
own on first start, as kubelet does (the API server does not verify it, as kube-apiserver without
--kubelet-certificate-authority).

Routes are a table (`Route`): another part of the agent adds its endpoint by adding a row.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelite.agent import logs
from kubelite.agent.streaming.handlers import StreamingHandlers
from kubelite.api import errors
from kubelite.clock import Clock

if TYPE_CHECKING:
    from kubelite.agent.pod_sync import PodSync

log = logging.getLogger("kubelite.agent.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str  # "*" for any (the streaming routes: kubectl's WebSocket GET or SPDY POST)
    path: str
    handler: Handler
    public: bool = False  # served without a client certificate (only /healthz)


def client_ca_from_kubeconfig(kubeconfig: Path) -> bytes | None:
    """The CA certificate (PEM) of the kubeconfig's current cluster, the default --client-ca-file."""
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    current: dict[str, str] = next((c["context"] for c in config.get("contexts") or []
                    if c.get("name") == config.get("current-context")), {})
    cluster = next((c["cluster"] for c in config.get("clusters") or []
                    if c.get("name") == current.get("cluster")), None)
    if cluster is None:
        cluster = ((config.get("clusters") or [{}])[0]).get("cluster") or {}
    if cluster.get("certificate-authority-data"):
        return base64.b64decode(cluster["certificate-authority-data"])
    if cluster.get("certificate-authority"):
        return Path(cluster["certificate-authority"]).read_bytes()
    return None


def ensure_serving_cert(cert_dir: Path, host: str) -> tuple[Path, Path]:
    """kubelet's self-signed serving certificate (cert-dir/kubelet.crt, .key), made once."""
    crt, key_path = cert_dir / "kubelet.crt", cert_dir / "kubelet.key"
    if crt.exists() and key_path.exists():
        return crt, key_path
    cert_dir.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{socket.gethostname()}@kubelite-agent")])
    now = dt.datetime.now(dt.UTC)
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([alt, x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return crt, key_path


def tls_context(cert: Path, key: Path, client_ca: bytes | None) -> ssl.SSLContext:
    """Serving TLS that asks for (but does not demand) a client certificate signed by `client_ca`: a request
    without one reaches the middleware, which answers 401 for every route but /healthz."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        log.warning("no client CA (--client-ca-file, or a CA in the kubeconfig): every caller of the agent's "
                    "endpoint but /healthz is refused")
    return ctx


def _unauthorized() -> web.Response:
    err = errors.unauthorized()
    return web.json_response(err.status(), status=err.code)


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    route = request.match_info.route
    if getattr(route.handler, "__public__", False) or route.resource is None:
        return await handler(request)  # /healthz, and 404/405 answers (they reveal nothing)
    if request.transport is None or not request.transport.get_extra_info("peercert"):
        return _unauthorized()  # no certificate, or none the CA signed (then TLS refused it already)
    return await handler(request)


def _mark_public(handler: Handler) -> Handler:
    async def public(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    public.__public__ = True  # type: ignore[attr-defined]
    return public


def application(routes: Sequence[Route]) -> web.Application:
    app = web.Application(middlewares=[_authenticate])
    for r in routes:
        app.router.add_route(r.method, r.path, _mark_public(r.handler) if r.public else r.handler)
    return app


def routes(find: Callable[[str, str], PodSync | None], clock: Clock) -> list[Route]:
    """kubelet's paths. `find` gives the pod this agent runs by namespace and name."""
    streams = StreamingHandlers(find, clock)

    async def healthz(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def container_logs(request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        syncer = find(ns, name)
        if syncer is None:
            err = errors.ApiError(404, "NotFound", f'pod "{name}" not found on this node')
            return web.json_response(err.status(), status=err.code)
        return await logs.serve(request, syncer, container, clock)

    return [
        Route("GET", "/healthz", healthz, public=True),
        Route("GET", "/containerLogs/{namespace}/{pod}/{container}", container_logs),
        Route("*", "/exec/{namespace}/{pod}/{container}", streams.exec),
        Route("*", "/attach/{namespace}/{pod}/{container}", streams.attach),
        Route("*", "/portForward/{namespace}/{pod}", streams.port_forward),
    ]


class AgentServer:
    """The running endpoint: `start` binds it (port 0: any free port, then `port` tells which)."""

    def __init__(self, routes: Sequence[Route], host: str, port: int, tls: ssl.SSLContext) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.runner = web.AppRunner(application(routes), handler_cancellation=True, access_log=None)

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port, ssl_context=self.tls)
        await site.start()
        if not self.port:
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        await self.runner.cleanup()
