"""`kubelite agent`, `scheduler` and `controller-manager`: one component as a client of a running API server.

Kept apart from `serve` (the control plane) so that these commands do not import the API
server: an agent that `kubelite up` restarts after a crash is back sooner. The scheduler and
the controller manager can run behind leader election (`--leader-elect`, a Lease in
kube-system named after the component, as upstream), so two of each may run side by side
with one active; one that loses its lease exits, as upstream's do, to be restarted as a
candidate by its supervisor. Every component takes `--server URL[,URL...]`: the API servers of an
HA control plane, failed over by the client (kubelite/client/http.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubelite.agent import config as node_config
from kubelite.agent import server
from kubelite.agent.agent import Agent
from kubelite.agent.certificates import with_certificate_rotation
from kubelite.agent.cgroups import Cgroups
from kubelite.agent.node import host_capacity
from kubelite.agent.proxy import nft
from kubelite.agent.proxy.proxier import Proxier
from kubelite.agent.runtime.process import ProcessRuntime
from kubelite.apiserver import gc_tuning  # the collector's tuning alone (no API server: it imports only gc)
from kubelite.cli import interrupts
from kubelite.client.http import ApiClient
from kubelite.client.interface import Client
from kubelite.clock import RealClock
from kubelite.controllers.fencing import fencing_factory
from kubelite.controllers.leaderelection import UPSTREAM_TIMING, LeadershipLost, LeaseTiming
from kubelite.controllers.leaderelection import elected as elected_on
from kubelite.controllers.manager import run_controllers
from kubelite.controllers.metrics import WorkqueueMetrics
from kubelite.controllers.registry import CONTROLLERS
from kubelite.controllers.saclients import ServiceAccountCredentials, credentialed
from kubelite.scheduler import config as scheduler_config
from kubelite.scheduler.metrics import SchedulerMetrics
from kubelite.scheduler.scheduler import Scheduler

T = TypeVar("T")


def over_http(main: Coroutine[Any, Any, T]) -> T:
    """Run a component that talks to the API server over HTTP, on the stock asyncio loop: under uvloop a
    connection reset or a cancelled connect can leave a file descriptor "used by transport" for good, after
    which every new connection fails and the component is cut off (MagicStack/uvloop#653, found by
    `make chaos`). The API server itself keeps uvloop (it only accepts connections)."""
    return asyncio.run(main)


def run_agent(kubeconfig: Path, node_name: str, data_dir: Path, config_file: Path | None, address: str,
              port: int, shutdown_grace: float | None = None, protect: Sequence[Path] = (),
              proxy_mode: str = "none", client_ca_file: Path | None = None,
              self_fence_after: float | None = None, servers: Sequence[str] = ()) -> int:
    """`kubelite agent`: a node agent for this machine, as a client of a running API server."""
    cfg = node_config.load(config_file)
    if shutdown_grace is not None:
        cfg.shutdown_grace_period = shutdown_grace
    if self_fence_after is not None:
        cfg.self_fence_after = self_fence_after
        node_config.check_self_fence(cfg)
    cfg.protected_paths = tuple(protect)
    private_files()
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    node_config.node_allocatable(cfg, host_capacity(data_dir, cfg.max_pods))  # exit 2 now, as kubelet, if it would
    runtime = ProcessRuntime(RealClock(), Cgroups.detect())
    client_ca = client_ca_file.read_bytes() if client_ca_file else server.client_ca_from_kubeconfig(kubeconfig)
    return over_http(run_component(lambda client: with_certificate_rotation(  # a joined node renews its certificate
        kubeconfig, client, RealClock(), Agent(client, RealClock(), node_name, data_dir, cfg, runtime, address, port,
                                               proxy=service_proxy(proxy_mode, client), client_ca=client_ca).run()),
        ApiClient.from_kubeconfig(kubeconfig, servers=servers)))


def service_proxy(mode: str, client: Client) -> Proxier | None:
    """The agent's service proxy for `--proxy-mode`; none without the `nft` command (then Services get
    endpoints but no ClusterIP/NodePort traffic, which the warning says)."""
    if mode == "none":
        return None
    if not nft.available():
        logging.getLogger("kubelite.agent").warning("no nft command: Service ClusterIPs will not be reachable "
                                                    "from this node (install nftables)")
        return None
    return Proxier(client, RealClock())


def private_files() -> None:
    """Files and dirs this process creates (state.db and its WAL, checkpoints, logs, keys) are its own:
    0600 / 0700. Containers get the usual 022 back from their shim."""
    os.umask(0o077)


def run_scheduler(kubeconfig: Path, config_file: Path | None, seed: int | None, leader_elect: bool = False,
                  metrics_address: str = "", servers: Sequence[str] = (), timing: LeaseTiming = UPSTREAM_TIMING) -> int:
    """`kubelite scheduler`: the scheduler alone, as a client of a running API server."""
    cfg = scheduler_config.load(config_file)
    metrics = SchedulerMetrics()

    def start(client: ApiClient) -> Coroutine[Any, Any, None]:
        return Scheduler(client, RealClock(), cfg, seed, metrics).run()

    gc_tuning.start_serving()  # a cache of every node and pod, as the API server's (gc_tuning.py)
    return over_http(run_component(elected("kube-scheduler", start, timing) if leader_elect else start,
                                    ApiClient.from_kubeconfig(kubeconfig, servers=servers), metrics_address,
                                    metrics.registry))


def run_controller_manager(kubeconfig: Path, names: list[str], leader_elect: bool, metrics_address: str = "",
                           fencing_config: Path | None = None, servers: Sequence[str] = (),
                           timing: LeaseTiming = UPSTREAM_TIMING, service_accounts: bool = False) -> int:
    """`kubelite controller-manager`: the selected controllers, as a client of a running API server (each under
    its own service account with `service_accounts`, as --use-service-account-credentials)."""
    metrics = WorkqueueMetrics(RealClock())
    configured = fencing_factory(fencing_config)  # a bad file is refused before anything connects

    def start(client: ApiClient) -> Coroutine[Any, Any, None]:
        factories = configured
        if service_accounts:
            credentials = ServiceAccountCredentials(
                client, lambda token: ApiClient.from_kubeconfig(kubeconfig, servers=servers, bearer_token=token))
            factories = credentialed({**CONTROLLERS, **configured}, credentials)
        return run_controllers(client, RealClock(), names, metrics, factories)

    gc_tuning.start_serving()  # informer caches, as in `kubelite server` (gc_tuning.py)
    return over_http(run_component(elected("kube-controller-manager", start, timing) if leader_elect else start,
                                    ApiClient.from_kubeconfig(kubeconfig, servers=servers), metrics_address,
                                    metrics.registry))


async def serve_metrics(address: str, registry: CollectorRegistry) -> web.AppRunner:
    """`/metrics` of `registry` on `address` (HOST:PORT, plain HTTP), as --metrics-bind-address asks."""
    host, _, port = address.rpartition(":")

    async def metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    return runner


def elected(lease: str, start: Callable[[ApiClient], Coroutine[Any, Any, None]], timing: LeaseTiming
            ) -> Callable[[ApiClient], Coroutine[Any, Any, None]]:
    """`start` behind leader election on the Lease kube-system/`lease`."""

    def run(client: ApiClient) -> Coroutine[Any, Any, None]:
        return elected_on(client, RealClock(), lease, lambda: start(client), timing)()

    return run


async def run_component(start: Callable[[ApiClient], Coroutine[Any, Any, None]], client: ApiClient,
                        metrics_address: str = "", registry: CollectorRegistry | None = None) -> int:
    """Run until SIGINT/SIGTERM (exit 0), or until the component ends on its own — a lost leader
    election — (exit 1); with `metrics_address`, serve `registry` there meanwhile."""
    stop = stop_on_signals()
    exposed = await serve_metrics(metrics_address, registry) if metrics_address and registry is not None else None
    task = asyncio.create_task(start(client))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if task.done():
        stopping.cancel()
        exc = task.exception() if not task.cancelled() else None
        print(f"kubelite: {exc or 'component stopped'}", file=sys.stderr)
        code = 1
    else:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await task
    if exposed is not None:
        await exposed.cleanup()
    await client.close()
    return code


def stop_on_signals() -> asyncio.Event:
    """SIGINT (Ctrl-C) and SIGTERM set the returned event instead of raising KeyboardInterrupt mid-await; set
    already if a Ctrl-C came during start-up and was lost (kubelite/cli/interrupts.py)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if interrupts.seen():
        stop.set()
    return stop
