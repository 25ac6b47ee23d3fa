"""The API server: routing, authentication, errors as Status, and its lifecycle.

Paths are parsed once by `request.parse_target` rather than registered route by route,
so the resource catalogue alone decides what is served. Any exception that is not an
ApiError is logged and answered as a Status, never as a traceback. Every request is
authenticated by the chain in `kubelite.apiserver.auth` (its user is `request[USER]`), may act as
another user (Impersonate-* headers, `auth.impersonation`), and is then authorized on its
RequestAttributes, as kube-apiserver's handler chain does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from kubelite.api import errors
from kubelite.api.errors import ApiError
from kubelite.apiserver import bootstrap, discovery, healthz, schema
from kubelite.apiserver.allocators import DEFAULT_SERVICE_CIDR
from kubelite.apiserver.auth import (
    accessreview,
    authenticator,
    authorization,
    authorizer,
    csrapproval,
    endpoints,
    impersonation,
    openidmetadata,
    setup,
)
from kubelite.apiserver.auth.admission import ServiceAccountAdmission
from kubelite.apiserver.auth.bootstrappolicy import ensure_bootstrap_policy
from kubelite.apiserver.auth.config import AuthConfig
from kubelite.apiserver.auth.context import serving_as
from kubelite.apiserver.auth.node import (
    RestrictedLeases,
    RestrictedNodes,
    admit_pod_create,
    node_identity,
    restrict_request,
)
from kubelite.apiserver.auth.rbac import PrivilegedGroups
from kubelite.apiserver.auth.requestinfo import RequestAttributes, new_request_info
from kubelite.apiserver.auth.user import ANONYMOUS_USER, SYSTEM_PRIVILEGED_GROUP, UNSECURED_USER, UserInfo
from kubelite.apiserver.cache import Caches
from kubelite.apiserver.customresources.serving import CustomResources
from kubelite.apiserver.endpoint_reconciler import EndpointReconciler
from kubelite.apiserver.event_ttl import DEFAULT_EVENT_TTL, ExpiringKeys
from kubelite.apiserver.handlers import ResourceHandlers, negotiate, respond
from kubelite.apiserver.metrics import ApiServerMetrics
from kubelite.apiserver.metrics_api import MetricsApi
from kubelite.apiserver.registry import RESOURCES
from kubelite.apiserver.registry.core import EVENTS, LEASES, NODES
from kubelite.apiserver.registry.pods import PODS, PodStrategy
from kubelite.apiserver.registry.rbac import Escalation, RBACStrategy
from kubelite.apiserver.registry.services import configure_services
from kubelite.apiserver.request import parse_target
from kubelite.apiserver.rest import Registry
from kubelite.clock import Clock
from kubelite.store.interface import Store, Unavailable

log = logging.getLogger("kubelite.apiserver")

PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})  # not /readyz/etcd: that one tells why
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
USER = web.RequestKey("user", UserInfo)  # the authenticated user of a request: request[USER]
COMPACTION_INTERVAL = 300.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class ApiServer:
    store: Store
    clock: Clock
    tokens: frozenset[str] = frozenset()  # the admin tokens; with no authenticator at all: --insecure, loopback only
    server_address: str = "127.0.0.1:6443"
    service_cidr: str = DEFAULT_SERVICE_CIDR  # --service-cluster-ip-range
    agent_tls: ssl.SSLContext | None = None  # TLS with the client certificate towards node agents (logs, exec)
    auth: AuthConfig = field(default_factory=AuthConfig)
    event_ttl: int = DEFAULT_EVENT_TTL  # --event-ttl (seconds): Events expire so long after their last write; 0: never
    caches: Caches = field(init=False)
    registry: Registry = field(init=False)
    custom_resources: CustomResources = field(init=False)  # what the CRDs define, served while they exist
    authentication: setup.Authentication = field(init=False)
    authorization: authorization.Authorization = field(init=False)
    issuer_discovery: openidmetadata.OpenIDMetadata | None = field(default=None, init=False)  # the OIDC documents
    ready: bool = field(default=False, init=False)
    stopping: bool = field(default=False, init=False)  # stop() has begun: /readyz's shutdown check fails
    endpoints: EndpointReconciler = field(init=False)  # this server in the kubernetes Service's endpoints
    event_expiry: ExpiringKeys | None = field(default=None, init=False)  # the Events' sweeper, once started
    _tasks: list[asyncio.Task[None]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.caches = Caches(self.store, RESOURCES)
        self.registry = Registry(self.store, self.caches, self.clock)
        self.handlers = ResourceHandlers(self.registry, self.agent_tls)
        self.custom_resources = CustomResources(self.registry)
        configure_services(self.registry.strategies, self.clock, self.service_cidr)
        self.metrics = ApiServerMetrics(self.clock, self.caches)
        self.metrics_api = MetricsApi(self.registry, self.clock, self.agent_tls)
        self.log_health = healthz.LogFlusher(self.clock)
        self.health = healthz.standard(healthz.StoreProbe(self.store, self.clock), self.log_health,
                                       lambda: self.ready, lambda: self.stopping)
        self._configure_auth()

    def _configure_auth(self) -> None:
        self.authentication = setup.build(self.auth, self.tokens, self.registry, self.clock)
        sa = self.auth.service_accounts
        if sa is not None:
            self.issuer_discovery = openidmetadata.discovery(sa.issuer, sa.jwks_uri, self.server_address,
                                                             list(sa.public_keys))
        admission = self.authentication.admission
        if admission is not None:
            pods = self.registry.strategies[PODS]
            assert isinstance(pods, PodStrategy)
            pods.plugins = (admission.admit,)
        modes = self.auth.authorization_modes
        self.authorization = authorization.build(modes, self.registry) if modes \
            else authorization.Authorization(self.auth.authorizer, None)
        if self.authorization.rbac is not None:  # RBAC's escalation checks on writes of roles and bindings
            escalation = Escalation(self.authorization.authorizer, self.authorization.rbac)
            for strategy in self.registry.strategies.values():
                if isinstance(strategy, RBACStrategy):
                    strategy.escalation = escalation
        if self.authorization.node_restriction:  # NodeRestriction's checks of bodies (requests: _authorize)
            pods = self.registry.strategies[PODS]
            assert isinstance(pods, PodStrategy)
            pods.plugins = (*pods.plugins, admit_pod_create)
            self.registry.strategies[NODES] = RestrictedNodes(NODES)
            self.registry.strategies[LEASES] = RestrictedLeases(LEASES)

    async def start(self) -> None:
        for resource in self.registry.strategies:
            schema.warm(resource.model)
        await self.caches.start()
        await bootstrap.ensure_defaults(self.registry)
        await self.custom_resources.start()
        await bootstrap.ensure_kubernetes_service(self.registry, self.server_address)
        self.endpoints = EndpointReconciler(self.registry, self.clock, self.server_address)
        await self.endpoints.reconcile()
        self._tasks.append(asyncio.create_task(self.endpoints.run(), name="endpoint-reconciler"))
        if self.authorization.rbac is not None:
            await ensure_bootstrap_policy(self.registry)
        self._tasks.append(asyncio.create_task(self._compact_loop(), name="compaction"))
        if self.event_ttl > 0:
            self.event_expiry = ExpiringKeys(self.store, self.clock, EVENTS.key_prefix, self.event_ttl)
            await self.event_expiry.start()
            self._tasks.append(asyncio.create_task(self.event_expiry.run(), name="event-ttl"))
        self.ready = True

    async def stop(self) -> None:
        self.stopping = True
        self.log_health.stop()
        if self.ready:  # leave the kubernetes Service's endpoints while the store is still here
            await self.endpoints.remove()
        self.ready = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await self.custom_resources.stop()
        await self.caches.stop()

    async def _compact_loop(self) -> None:
        """Compact the change log to the revision seen one interval ago, as kube-apiserver does."""
        previous = self.store.revision
        while True:
            await self.clock.sleep(COMPACTION_INTERVAL)
            if previous > self.store.compacted_revision:
                try:
                    await self.store.compact(previous)
                except Exception:  # a failed compaction is retried next interval
                    log.exception("compaction failed")
            previous = self.store.revision

    # --- HTTP ------------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    def _middleware(self, request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        """The metrics' measurement around `_guarded`. It returns `measure`'s coroutine for its caller (aiohttp, the
        in-process client) to await rather than awaiting it itself: a coroutine less that every request enters and
        every suspension of a request's handler passes through twice, out and back in."""
        return self.metrics.measure(request, self._guarded, handler)

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            request[USER] = user = self._authenticate(request)
            if impersonation.requested(request.headers):
                request, user = self._impersonate(request, user)
            if request.path not in PUBLIC_PATHS:
                self._authorize(request, user)
            with serving_as(user):
                return await handler(request)
        except ApiError as exc:
            resp = respond(exc.status(), exc.code)
            resp.headers.update(exc.headers)
            return resp
        except impersonation.WithoutUser as exc:
            return impersonation.internal_error(request.raw_path, exc)
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except web.HTTPException:
            raise
        except Unavailable as exc:  # the store is down: an operational condition, one line, no traceback
            request_id = str(uuid.uuid4())
            log.error("store unavailable serving %s %s (request id %s): %s", request.method, request.path_qs,
                      request_id, exc)
            return _internal_error(request_id)
        except Exception:  # never a traceback, nor an exception's text, to the client: the log has both
            request_id = str(uuid.uuid4())
            log.exception("internal error serving %s %s (request id %s)", request.method, request.path_qs,
                          request_id)
            return _internal_error(request_id)

    def _authenticate(self, request: web.Request) -> UserInfo:
        """The request's user; 401 when nothing authenticates it (the public health and version paths are served
        to anyone, as upstream's anonymous conditions for them)."""
        chain = self.authentication.chain
        if chain is None:
            return UNSECURED_USER
        user = chain.authenticate(
            authenticator.AuthRequest(request.headers, _peer_certificate(request), request.path))
        if user is not None:
            return user
        if request.path in PUBLIC_PATHS:
            return ANONYMOUS_USER
        raise errors.unauthorized()

    def _impersonate(self, request: web.Request, user: UserInfo) -> tuple[web.Request, UserInfo]:
        """WithImpersonation, between authentication and authorization as upstream's chain: the request as the
        impersonated user (`request[USER]`) without its Impersonate-* headers, once the authenticated user may
        impersonate all it asks for (else a 403 ApiError). A request asking for nothing passes unchanged. `clone`
        needs a whole aiohttp request: HTTP's, and the in-process `exchange`'s; the in-process LoopbackRequest
        never gets here, its headers being the client's fixed set."""
        acting = impersonation.impersonate(user, request.headers, self.authorization.authorizer)
        if acting is None:
            return request, user
        log.debug("%s is impersonating %s", user.name, acting.name)
        request = request.clone(headers=impersonation.without_headers(request.headers))
        request[USER] = acting
        return request, acting

    def _authorize(self, request: web.Request, user: UserInfo) -> None:
        if self._allowed_anything(user):
            return
        attributes = RequestAttributes(user, new_request_info(request.method, request.path, request.query))
        decision, reason = self.authorization.authorizer.authorize(attributes)
        if decision is not authorizer.Decision.ALLOW:
            raise authorizer.forbidden(attributes, reason)
        refusal = restrict_request(attributes, self.registry) if self.authorization.node_restriction else None
        if refusal is not None:
            raise authorizer.admission_forbidden(attributes, refusal)

    def _allowed_anything(self, user: UserInfo) -> bool:
        """Whether the decision cannot depend on what `user` asks, so the request's attributes need not be built:
        the authorizer allows everything, or its first authorizer is the privileged-groups one and the user is a
        system:masters member (the loopback client, an admin token) — and NodeRestriction has nothing to say to
        the user, who is no node. The same answer the full check gives (a table test says so), without parsing
        the path into attributes for every request of the server's own components."""
        decider = self.authorization.authorizer
        if isinstance(decider, authorizer.AlwaysAllow):
            allowed = True
        elif isinstance(decider, authorizer.Union) and decider.authorizers:
            allowed = isinstance(decider.authorizers[0], PrivilegedGroups) and SYSTEM_PRIVILEGED_GROUP in user.groups
        else:
            allowed = False
        return allowed and not (self.authorization.node_restriction and node_identity(user) is not None)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path.startswith(HEALTH_PATHS):
            health = await self.health.serve(request, path)
            if health is not None:
                return health
        if path == "/metrics" and request.method == "GET":
            return self.metrics.response()
        # A resource's path (nearly every request) is neither discovery (at most /apis/GROUP/VERSION) nor
        # metrics.k8s.io (served by no registry): both are asked only of paths that name no resource.
        target = parse_target(path)
        if target is None:
            custom = self.custom_resources.target(request.method, path)
            if custom is not None:
                return await self.handlers.handle_custom(request, custom)
            doc = self._discovery(request, path) if request.method == "GET" else None
            if doc is None and self.issuer_discovery is not None:
                doc = self.issuer_discovery.response(request.method, path)
            if doc is not None:
                return doc
            metrics = await self.metrics_api.handle(request, path)
            if metrics is not None:  # NodeMetrics/PodMetrics have messages: protobuf for `kubectl top`, as
                return negotiate(request, metrics)  # metrics-server answers it
            if path.startswith("/openapi/v2"):
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource",
                                  {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})
        if endpoints.handles(target):
            return negotiate(request, await endpoints.serve(request, target, request[USER], self.registry,
                                                            self.authentication.service_account_tokens,
                                                            self.authorization.node_restriction))
        if csrapproval.handles(target):
            return negotiate(request, await csrapproval.serve(request, target, request[USER], self.registry,
                                                              self.authorization.authorizer))
        if accessreview.handles(target):
            return negotiate(request, await accessreview.serve(request, target, request[USER],
                                                               self.authorization.authorizer, self.authorization.rbac))
        if self.authentication.admission is not None and target.resource is PODS and request.method == "POST" \
                and not target.subresource:
            await ServiceAccountAdmission.await_default(self.registry, self.clock, target.namespace)
        return await self.handlers.handle(request, target)

    def _discovery(self, request: web.Request, path: str) -> web.StreamResponse | None:
        accept = request.headers.get("Accept", "")
        aggregated = "g=apidiscovery.k8s.io;v=v2" in accept
        extra = self.custom_resources.resources()
        if path == "/version":
            return respond(discovery.VERSION)
        if path in ("/api", "/apis") and aggregated:
            resp = respond(discovery.aggregated(path == "/api", extra))
            resp.content_type = discovery.AGGREGATED_V2.split(";")[0]
            resp.headers["Content-Type"] = discovery.AGGREGATED_V2
            return resp
        if path == "/api":
            return respond(discovery.api_versions(self.server_address))
        if path == "/apis":
            return respond(discovery.api_group_list(extra))
        if path == "/openapi/v3":
            return respond(discovery.openapi_index(extra))
        if path.startswith("/openapi/v3/"):
            doc = discovery.openapi_document(path.removeprefix("/openapi/v3/"), extra)
            return respond(doc) if doc is not None else None
        parts = path.strip("/").split("/")
        if parts == ["api", "v1"]:
            return respond(discovery.resource_list("v1"))
        if len(parts) == 2 and parts[0] == "apis":
            group = discovery.api_group(parts[1], extra)
            return respond(group) if group is not None else None
        if len(parts) == 3 and parts[0] == "apis":
            rl = discovery.resource_list(f"{parts[1]}/{parts[2]}", extra)
            return respond(rl) if rl is not None else None
        return None


def _internal_error(request_id: str) -> web.StreamResponse:
    """The 500 Status of an unexpected failure, naming the request id under which the log has the details."""
    err = errors.internal(f"an error on the server (request id {request_id}) has prevented the request "
                          "from succeeding")
    resp = respond(err.status(), err.code)
    resp.headers["Audit-Id"] = request_id  # kube-apiserver's per-request id header
    return resp


def _peer_certificate(request: web.Request) -> bytes | None:
    """The client's certificate (DER), already verified against the cluster CA by the TLS handshake."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    der: bytes | None = ssl_object.getpeercert(binary_form=True)
    return der
