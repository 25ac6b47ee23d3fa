"""The composition root for `kubelite server` and `kubelite up` (`agent` and `scheduler` alone: components).

`server` is the store, the API server (TLS, token, kubeconfig), the scheduler and the
controllers in one process. The components are API clients even there, but of the in-process
transport: it calls the server's request handling directly (same authentication, admission,
validation and watch cache as over HTTP; no socket or TLS). `up` adds the local node agent as a
supervised child process over HTTP: it uses the other core, and like kubelet under systemd it is
restarted if it dies, re-adopting its pods' processes from its checkpoint.

Several servers may share one etcd cluster (an HA control plane): each serves the API, and their
scheduler and controllers run behind leader election (the Leases kube-system/kube-scheduler and
kube-system/kube-controller-manager, as upstream), so that one of each acts at a time. It is on
by default with an etcd store and off with SQLite (one process's file: there is no second server
to elect against, and a restarted server need not wait out its own dead Lease); `--leader-elect`
/ `--no-leader-elect` decide otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop
from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry

from kubelite.agent import config as node_config
from kubelite.agent.config import NodeConfigError
from kubelite.agent.node import host_capacity
from kubelite.apiserver import encryption, gc_tuning, node_connection, pki
from kubelite.apiserver.allocators import DEFAULT_SERVICE_CIDR, kubernetes_service_ip
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth import authorization, jwt, tokenfile
from kubelite.apiserver.auth.config import AuthConfig, ServiceAccountConfig
from kubelite.apiserver.auth.serviceaccount import DEFAULT_ISSUER
from kubelite.apiserver.auth.x509 import tls_server_context
from kubelite.apiserver.encryption import EncryptionConfigError, PrefixTransformer, TransformError
from kubelite.apiserver.event_ttl import DEFAULT_EVENT_TTL
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.cli.components import private_files, stop_on_signals
from kubelite.client.interface import Client
from kubelite.clock import Clock, RealClock, bounded
from kubelite.controllers import csrsigning, registry
from kubelite.controllers.fencing import fencing_factory
from kubelite.controllers.horizontal import HorizontalController
from kubelite.controllers.leaderelection import LeaseTiming, elected
from kubelite.controllers.manager import keep_running, run_controllers
from kubelite.controllers.metrics import WorkqueueMetrics
from kubelite.controllers.nodelifecycle import NodeLifecycleController, NodeLifecycleOptions
from kubelite.controllers.rootcacertpublisher import RootCACertPublisher
from kubelite.scheduler import config as scheduler_config
from kubelite.scheduler.config import ConfigError
from kubelite.scheduler.metrics import SchedulerMetrics
from kubelite.scheduler.scheduler import Scheduler
from kubelite.store import StoreConfigError, StoreSpec
from kubelite.store.interface import Store

__all__ = ["ConfigError", "EncryptionConfigError", "NodeConfigError", "Options", "TransformError", "run"]
log = logging.getLogger("kubelite")
AGENT_RESTART_DELAY = 1.0
AGENT_STOP_TIMEOUT = 30.0
UP_SHUTDOWN_GRACE = 10.0


REQUEST_DRAIN = 3.0  # seconds a request in flight may take to finish when the server stops

@dataclass(frozen=True)
class AuthOptions:
    """kube-apiserver's authentication flags (see README "Authentication and service accounts")."""

    token_auth_file: Path | None = None
    client_ca_file: Path | None = None  # default: the cluster CA
    anonymous: bool = False
    service_account_issuer: str = DEFAULT_ISSUER
    service_account_signing_key_file: Path | None = None  # default: pki/sa.key
    service_account_key_files: tuple[Path, ...] = ()  # default: the signing key's public half
    service_account_jwks_uri: str = ""  # default: https://ADVERTISED-ADDRESS:PORT/openid/v1/jwks
    api_audiences: tuple[str, ...] = ()
    authorization_mode: str = "Node,RBAC"


@dataclass(frozen=True)
class Options:
    data_dir: Path
    port: int
    bind: str = "127.0.0.1"
    advertise: str = ""  # --advertise-address; empty: the bind address (loopback for a wildcard)
    insecure: bool = False
    disabled: frozenset[str] = frozenset()
    auth: AuthOptions = field(default_factory=AuthOptions)
    scheduler_config: Path | None = None
    node_config: Path | None = None
    local_node: bool = False  # `up`: also run a node agent for this machine
    node_monitor_grace_period: float = 40.0
    hpa_sync_period: float = 15.0  # --horizontal-pod-autoscaler-sync-period, seconds
    service_cidr: str = DEFAULT_SERVICE_CIDR
    event_ttl: int = DEFAULT_EVENT_TTL  # --event-ttl in whole seconds (0: Events never expire)
    encryption_key_file: Path | None = None  # an EncryptionConfiguration: Secrets encrypted at rest
    store: StoreSpec = field(default_factory=StoreSpec)  # --store: SQLite under data_dir, or etcd://
    fencing_config: Path | None = None  # a FencingConfiguration (controllers/fencing_config.py)
    leader_elect: bool | None = None  # None: on with an etcd store (several servers may share it), off with SQLite
    lease: LeaseTiming = field(default_factory=LeaseTiming)  # --leader-elect-lease-duration/-renew-deadline/...

    @property
    def elect(self) -> bool:
        return self.store.is_etcd if self.leader_elect is None else self.leader_elect


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def run(opts: Options) -> int:
    if opts.insecure and not _is_loopback(opts.bind):
        raise ConfigError(f"--insecure serves without authentication and may only bind a loopback address, "
                          f"not {opts.bind}")
    sched = scheduler_config.load(opts.scheduler_config) if "scheduler" not in opts.disabled else None
    fencing_factory(opts.fencing_config)  # a bad --fencing-config stops the start (exit 2), not a controller
    try:
        kubernetes_service_ip(opts.service_cidr)
    except ValueError as exc:
        raise ConfigError(f"--service-cluster-ip-range: {exc}") from None
    try:
        opts.store.check()
    except StoreConfigError as exc:
        raise ConfigError(str(exc)) from None
    if opts.local_node:  # a bad file, or one reserving more than this host has, fails `up` now, not its agent in a
        # restart loop (the data dir's filesystem as the agent's, which lives in it, once made)
        cfg = node_config.load(opts.node_config)
        disk = next(p for p in (opts.data_dir, *opts.data_dir.parents) if p.exists())
        node_config.node_allocatable(cfg, host_capacity(disk, cfg.max_pods))
    transformers = encryption.load_config(opts.encryption_key_file) if opts.encryption_key_file else {}
    try:
        uvloop.run(_serve(opts, sched, transformers))
    except StoreConfigError as exc:  # e.g. no etcd member answered
        raise ConfigError(str(exc)) from None
    return 0


async def _supervise(argv: list[str], clock: Clock) -> None:
    """Run a child process until cancelled, restarting it whenever it exits; on cancel, SIGTERM and wait."""
    while True:
        proc = await asyncio.create_subprocess_exec(*argv)
        try:
            code = await proc.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            finished, _ = await bounded(clock, proc.wait(), AGENT_STOP_TIMEOUT)
            if not finished:
                proc.kill()
            raise
        log.warning("node agent exited with %s; restarting it", code)
        await clock.sleep(AGENT_RESTART_DELAY)


async def _serve(opts: Options, sched: scheduler_config.SchedulerConfig | None,
                 transformers: dict[str, PrefixTransformer]) -> None:
    # Signals first: a Ctrl-C during start-up then finishes starting and shuts down cleanly, no traceback.
    stop = stop_on_signals()
    data = opts.data_dir
    private_files()
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)
    async with contextlib.AsyncExitStack() as cleanup:  # undone in reverse order on the way out
        raw = await opts.store.open(data)
        cleanup.push_async_callback(raw.close)
        store: Store = encryption.EncryptingStore(raw, transformers) if transformers else raw
        host = opts.advertise or ("127.0.0.1" if opts.bind in ("0.0.0.0", "::") else opts.bind)
        scheme = "http" if opts.insecure else "https"
        url = f"{scheme}://[{host}]:{opts.port}" if ":" in host else f"{scheme}://{host}:{opts.port}"
        ssl_ctx: ssl.SSLContext | None = None
        authorities: tuple[x509.Certificate, ...] = ()
        tokens: frozenset[str] = frozenset()
        ca = None
        token = None
        # The CA exists in --insecure mode too: the root-CA publisher hands it to pods (kube-root-ca.crt), and it
        # signs the API server's client certificate towards node agents.
        cluster_ca, crt, key = pki.ensure_pki(data / "pki", [opts.bind, host, kubernetes_service_ip(opts.service_cidr)])
        agent_tls = node_connection.client_context(*pki.ensure_agent_client(data / "pki"))
        if not opts.insecure:
            ca = cluster_ca
            token = pki.ensure_token(data / "admin.token")
            tokens = frozenset([token])
            try:
                ssl_ctx, authorities = tls_server_context(crt, key, opts.auth.client_ca_file or cluster_ca)
            except (OSError, ValueError) as exc:  # ssl.SSLError too
                raise ConfigError(f"--client-ca-file {opts.auth.client_ca_file}: {exc}") from None
        auth = _auth_config(opts, data / "pki", authorities)
        server = ApiServer(store, RealClock(), tokens, f"{host}:{opts.port}", service_cidr=opts.service_cidr,
                           agent_tls=agent_tls, auth=auth, event_ttl=opts.event_ttl)
        await server.start()
        gc_tuning.start_serving()  # start-up's objects frozen, collections rarer (gc_tuning.py)
        cleanup.push_async_callback(server.stop)
        # On stop, requests in flight get REQUEST_DRAIN seconds and are then cancelled: watches never end by
        # themselves, and aiohttp's default (60 s per connection) kept a server with open watches alive for a minute.
        runner = web.AppRunner(server.app(), handler_cancellation=True, access_log=None,
                               shutdown_timeout=REQUEST_DRAIN)
        await runner.setup()
        cleanup.push_async_callback(_quietly, runner.cleanup())
        site = web.TCPSite(runner, opts.bind, opts.port, ssl_context=ssl_ctx, backlog=4096)
        await site.start()
        kubeconfig = data / "kubeconfig"
        pki.write_kubeconfig(kubeconfig, url, token, ca)
        if ca is not None:  # the components' own identities (README "Many machines: identities, RBAC ...")
            pki.write_component_kubeconfigs(data / "pki", url, socket.gethostname().lower())
        print(f"kubelite: API server listening on {url}", flush=True)
        print(f"kubelite: export KUBECONFIG={kubeconfig}", flush=True)
        components = _start_components(opts, sched, InProcessClient(server), kubeconfig, server.metrics.include,
                                       cluster_ca.read_bytes())
        cleanup.push_async_callback(_stop_components, components)
        await stop.wait()
        log.info("shutting down")


def _auth_config(opts: Options, pki_dir: Path, authorities: tuple[x509.Certificate, ...]) -> AuthConfig:
    """Authentication from the flags: the token file, client certificates (over TLS), anonymous, and the
    service-account signing and verification keys (by default a key generated into the PKI directory)."""
    a = opts.auth
    try:
        static = tokenfile.load_token_file(a.token_auth_file) if a.token_auth_file else {}
        signing = jwt.load_signing_key(a.service_account_signing_key_file or pki.ensure_service_account_key(pki_dir))
        public = [k for f in a.service_account_key_files for k in jwt.load_public_keys(f)] or [signing.public_key()]
    except (OSError, tokenfile.TokenFileError, jwt.KeyFileError) as exc:
        raise ConfigError(str(exc)) from None
    try:
        modes = authorization.parse_modes(a.authorization_mode)
    except ValueError as exc:
        raise ConfigError(f"--authorization-mode: {exc}") from None
    accounts = ServiceAccountConfig(signing, tuple(public), a.service_account_issuer, a.api_audiences,
                                    jwks_uri=a.service_account_jwks_uri)
    return AuthConfig(static, client_certificates=not opts.insecure, client_authorities=authorities,
                      anonymous=a.anonymous,
                      service_accounts=accounts, bootstrap_tokens=not opts.insecure, authorization_modes=modes)


def _start_components(opts: Options, sched: scheduler_config.SchedulerConfig | None, client: Client,
                      kubeconfig: Path, expose: Callable[[CollectorRegistry], None],
                      root_ca: bytes) -> list[asyncio.Task[None]]:
    """The scheduler and controllers over the in-process client; under `up`, the node agent as a child over HTTP.

    Components are clients like any other: they reach this server through its request handling,
    never its memory or its store. Their metrics registries are `expose`d on the server's /metrics.
    """
    components: list[asyncio.Task[None]] = []
    clock = RealClock()

    def maybe_elected(lease: str, lead: Callable[[], Coroutine[Any, Any, None]]
                      ) -> Callable[[], Coroutine[Any, Any, None]]:
        # keep_running makes a lost election (LeadershipLost) a fresh candidacy after its back-off
        return elected(client, clock, lease, lead, opts.lease) if opts.elect else lead

    if sched is not None:
        config = sched
        scheduler_metrics = SchedulerMetrics()
        expose(scheduler_metrics.registry)

        def scheduler() -> Coroutine[Any, Any, None]:
            return Scheduler(client, clock, config, metrics=scheduler_metrics).run()

        components.append(asyncio.create_task(
            keep_running("scheduler", maybe_elected("kube-scheduler", scheduler), clock), name="scheduler"))
    if "controllers" not in opts.disabled:
        lifecycle = NodeLifecycleOptions(node_monitor_grace_period=opts.node_monitor_grace_period)
        configured: dict[str, registry.Factory] = {
            "nodelifecycle": functools.partial(NodeLifecycleController, options=lifecycle),
            "horizontalpodautoscaling": functools.partial(HorizontalController, sync_period=opts.hpa_sync_period),
            "root-ca-cert-publisher": functools.partial(RootCACertPublisher, root_ca=root_ca),
            "csrsigning": csrsigning.factory(root_ca, (opts.data_dir / "pki" / "ca.key").read_bytes())}
        configured.update(fencing_factory(opts.fencing_config))
        queue_metrics = WorkqueueMetrics(clock)
        expose(queue_metrics.registry)

        def controllers() -> Coroutine[Any, Any, None]:
            return run_controllers(client, clock, None, queue_metrics, configured)

        components.append(asyncio.create_task(
            keep_running("controller-manager", maybe_elected("kube-controller-manager", controllers), clock),
            name="controller-manager"))
    if opts.local_node:
        node_kubeconfig = opts.data_dir / "pki" / "node.kubeconfig"  # system:node:NAME, unless --insecure
        agent_kubeconfig = node_kubeconfig if node_kubeconfig.exists() and not opts.insecure else kubeconfig
        argv = [sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(agent_kubeconfig),
                "--node-name",
                socket.gethostname().lower(), "--data-dir", str(opts.data_dir / "agent"), "--address", "127.0.0.1",
                "--protect-path", str(opts.data_dir),  # admin token, CA key, state.db: never in a container
                "--client-ca-file", str(opts.data_dir / "pki" / "ca.crt"),  # only the API server may call it
                # `up` stopping is this node going away: its pods stop with it (graceful node shutdown)
                "--shutdown-grace-period", str(UP_SHUTDOWN_GRACE)]
        if opts.node_config is not None:
            argv += ["--node-config", str(opts.node_config)]
        components.append(asyncio.create_task(_supervise(argv, clock), name="agent"))
    return components


async def _stop_components(components: list[asyncio.Task[None]]) -> None:
    for task in components:
        task.cancel()
    await asyncio.gather(*components, return_exceptions=True)


async def _quietly(work: Awaitable[None]) -> None:
    with contextlib.suppress(Exception):
        await work
