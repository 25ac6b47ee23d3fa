"""`kubelite` command line: server, up, agent, scheduler, controller-manager, explain.

Each command imports only what it runs (`agent` does not load the API server), so a
component restarted after a crash is back quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kubelite.cli import interrupts
from kubelite.sim import cli as sim_cli

if TYPE_CHECKING:
    from kubelite.controllers.leaderelection import LeaseTiming

COMPONENTS = ("scheduler", "controllers")
KUBELET_PORT = 10250  # a joined node's agent listens where kubelet does, so firewalls can name it


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kubelite"


def ip_address(text: str) -> str:
    """An IP address flag, checked as the command line is read (argparse: "invalid ip_address value")."""
    ipaddress.ip_address(text)
    return text


def port_number(text: str) -> int:
    """A port flag, checked as the command line is read (argparse: "invalid port_number value")."""
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(text)
    return port


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=default_data_dir(), help="state, certificates, kubeconfig")
    p.add_argument("--port", type=port_number, default=6443)
    p.add_argument("--bind-address", default="127.0.0.1",
                   help="address to listen on (with --insecure only loopback addresses are allowed)")
    p.add_argument("--advertise-address", default=None, metavar="IP", type=ip_address,
                   help="the address the rest of the cluster reaches this server at: the kubeconfig's and the join "
                        "command's URL, the serving certificate and the kubernetes Service (default: --bind-address, "
                        "127.0.0.1 for 0.0.0.0)")
    p.add_argument("--insecure", action="store_true", help="plain HTTP without authentication, loopback only")
    p.add_argument("--disable", default="", help=f"comma-separated components to leave out: {', '.join(COMPONENTS)}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def _auth_flags(p: argparse.ArgumentParser) -> None:
    """kube-apiserver's authentication flags, same names."""
    p.add_argument("--token-auth-file", type=Path, help="static bearer tokens: CSV token,user,uid,\"group1,group2\"")
    p.add_argument("--client-ca-file", type=Path, help="CA for client certificates (default: the cluster CA)")
    p.add_argument("--anonymous-auth", action="store_true",
                   help="serve unauthenticated requests as system:anonymous instead of refusing them (401)")
    p.add_argument("--service-account-issuer", default="https://kubernetes.default.svc.cluster.local",
                   help="the iss claim of service-account tokens")
    p.add_argument("--service-account-signing-key-file", type=Path,
                   help="private key (RSA or EC P-256) signing service-account tokens (default: DATA_DIR/pki/sa.key)")
    p.add_argument("--service-account-key-file", type=Path, action="append", default=[],
                   help="PEM file of public keys verifying service-account tokens (repeatable; default: the "
                        "signing key's)")
    p.add_argument("--api-audiences", default="", help="comma-separated audiences of the API (default: the issuer)")
    p.add_argument("--service-account-jwks-uri", default="",
                   help="the jwks_uri of the discovery document at /.well-known/openid-configuration, when the "
                        "key set is published elsewhere (must be https; default: "
                        "https://ADVERTISED-ADDRESS:PORT/openid/v1/jwks)")
    p.add_argument("--authorization-mode", default="Node,RBAC",
                   help="comma-separated authorizers in order: AlwaysAllow, AlwaysDeny, Node, RBAC "
                        "(system:masters, the admin kubeconfig's group, is always allowed)")


def _leader_election_flags(p: argparse.ArgumentParser) -> None:
    """kube-scheduler's and kube-controller-manager's --leader-elect-* timings, in seconds (defaults: upstream's,
    from kubelite/controllers/leaderelection.py, imported only by the commands that elect)."""
    p.add_argument("--leader-elect-lease-duration", type=float, default=None, metavar="SECONDS",
                   help="how long a standby waits, from the last renewal it saw, before taking the Lease (15)")
    p.add_argument("--leader-elect-renew-deadline", type=float, default=None, metavar="SECONDS",
                   help="how long the leader keeps trying to renew before it stops leading (10)")
    p.add_argument("--leader-elect-retry-period", type=float, default=None, metavar="SECONDS",
                   help="how often candidates try to take, and the leader to renew, the Lease (2)")


def _servers_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default="", metavar="URL[,URL...]",
                   help="API server(s) to use instead of the kubeconfig's: several for an HA control plane, "
                        "the next one used whenever the current one is unreachable")


def _timing(args: argparse.Namespace) -> LeaseTiming:
    from kubelite.controllers import leaderelection as le

    given = {"lease_duration": args.leader_elect_lease_duration, "renew_deadline": args.leader_elect_renew_deadline,
             "retry_period": args.leader_elect_retry_period}
    try:
        return le.LeaseTiming(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise UsageError(f"--leader-elect-*: {exc}") from None


def event_ttl(text: str) -> int:
    """--event-ttl, checked as the command line is read (argparse: "argument --event-ttl: ...", exit 2)."""
    from kubelite.apiserver.event_ttl import parse_event_ttl

    try:
        return parse_event_ttl(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class UsageError(Exception):
    """A flag value the parser cannot check alone; reported as `kubelite: ...`, exit 2."""


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="kubelite", description="A Kubernetes-compatible pod orchestrator")
    sub = root.add_subparsers(dest="command", required=True)
    server = sub.add_parser("server", help="run the control plane (API server and scheduler)")
    _common(server)
    up = sub.add_parser("up", help="run the control plane and a local node agent")
    _common(up)
    up.add_argument("--node-config", type=Path, help="KubeletConfiguration file for the local node")
    for p in (server, up):
        _auth_flags(p)
    for p in (server, up):
        p.add_argument("--scheduler-config", type=Path, help="KubeSchedulerConfiguration file")
        p.add_argument("--encryption-key-file", type=Path, default=None,
                       help="EncryptionConfiguration file: Secrets encrypted at rest (aesgcm, identity)")
        p.add_argument("--node-monitor-grace-period", type=float, default=40.0, metavar="SECONDS",
                       help="how long a node may go without a heartbeat before it is marked Unknown and tainted")
        p.add_argument("--horizontal-pod-autoscaler-sync-period", type=float, default=15.0, metavar="SECONDS",
                       help="how often each HorizontalPodAutoscaler is reconciled (default 15, upstream's)")
        p.add_argument("--fencing-config", type=Path, default=None, metavar="FILE",
                       help="FencingConfiguration: fence agents per node pool (default: never fence)")
        p.add_argument("--service-cluster-ip-range", default="10.96.0.0/12", metavar="CIDR",
                       help="IPv4 range Service ClusterIPs are allocated from (the kubernetes Service gets the first)")
        p.add_argument("--event-ttl", type=event_ttl, default="1h0m0s", metavar="DURATION",
                       help="how long an Event is kept after its last write, e.g. 1h0m0s, 30m, 90s (default 1h0m0s, "
                            "kube-apiserver's; 0: forever)")
        p.add_argument("--store", default="sqlite", metavar="sqlite|etcd://HOST:PORT[,HOST:PORT...]",
                       help="where objects live: a SQLite file in the data directory (default) or an etcd cluster")
        p.add_argument("--etcd-cafile", type=Path, help="CA bundle that signed the etcd members' certificates")
        p.add_argument("--etcd-certfile", type=Path, help="client certificate for etcd (with --etcd-keyfile)")
        p.add_argument("--etcd-keyfile", type=Path, help="client key for etcd")
        p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                       help="run the scheduler and controllers only while holding their kube-system Leases, so "
                            "that several servers may share one etcd (default: on with --store etcd://, off with "
                            "sqlite)")
        _leader_election_flags(p)
    agent = sub.add_parser("agent", help="run a node agent, as a client of an API server")
    agent.add_argument("--kubeconfig", type=Path, required=True)
    agent.add_argument("--node-name", default=socket.gethostname().lower())
    agent.add_argument("--data-dir", type=Path, default=default_data_dir() / "agent")
    agent.add_argument("--node-config", type=Path, help="KubeletConfiguration file")
    agent.add_argument("--address", default="127.0.0.1", help="this node's address (pods use the host network)")
    agent.add_argument("--port", type=port_number, default=0,
                       help="port for the agent's log endpoint (0: any free port)")
    agent.add_argument("--shutdown-grace-period", type=float, default=None,
                       help="on SIGTERM, stop every pod with at most this grace (seconds); default: leave them running")
    agent.add_argument("--self-fence-after", type=float, default=None, metavar="SECONDS",
                       help="kill every container after this long without a Lease renewal, start none until "
                            "back in contact (advertised to the fencing controller's `self` agent)")
    agent.add_argument("--protect-path", type=Path, action="append", default=[],
                       help="a directory no container may see (repeatable); the agent's --data-dir always is one")
    agent.add_argument("--proxy-mode", choices=["nftables", "none"], default="nftables",
                       help="how the agent routes Service ClusterIP/NodePort traffic (none: no service proxy)")
    agent.add_argument("--client-ca-file", type=Path, default=None,
                       help="CA whose client certificates may call the agent's endpoint (default: the kubeconfig's)")
    _servers_flag(agent)
    agent.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sched = sub.add_parser("scheduler", help="run the scheduler alone, as a client of an API server")
    sched.add_argument("--kubeconfig", type=Path, required=True)
    sched.add_argument("--config", type=Path, help="KubeSchedulerConfiguration file")
    sched.add_argument("--seed", type=int, help="seed for breaking score ties (reproducible placements)")
    sched.add_argument("--leader-elect", action="store_true",
                       help="run only while holding the kube-system/kube-scheduler Lease (several may run)")
    sched.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    cm = sub.add_parser("controller-manager", help="run the controllers, as a client of an API server")
    cm.add_argument("--kubeconfig", type=Path, required=True)
    cm.add_argument("--controllers", default="*",
                    help="controllers to run: '*' for all, a name to enable, '-name' to disable (default '*')")
    cm.add_argument("--leader-elect", action="store_true",
                    help="run only while holding the kube-system/kube-controller-manager Lease (several may run)")
    cm.add_argument("--fencing-config", type=Path, default=None, metavar="FILE",
                    help="FencingConfiguration: fence agents per node pool (default: never fence)")
    cm.add_argument("--use-service-account-credentials", action="store_true",
                    help="run each controller under its own service account kube-system/NAME (the "
                         "system:controller:NAME roles), as kube-controller-manager's flag")
    cm.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    for p in (sched, cm):
        _leader_election_flags(p)
        _servers_flag(p)
        p.add_argument("--metrics-bind-address", default="", metavar="HOST:PORT",
                       help="serve /metrics (Prometheus text, plain HTTP) there; default: not served")
    token = sub.add_parser("token", help="bootstrap tokens for joining nodes (as kubeadm token)")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_create = token_sub.add_parser("create", help="create a bootstrap token (and publish cluster-info)")
    token_create.add_argument("--kubeconfig", type=Path, default=None,
                              help="an administrator's kubeconfig (default: $KUBECONFIG, else the local cluster's)")
    token_create.add_argument("--ttl", type=float, default=24 * 3600.0, metavar="SECONDS",
                              help="seconds until the token expires (0: never)")
    token_create.add_argument("--description", default="kubelite join token")
    token_create.add_argument("--print-join-command", action="store_true",
                              help="print the whole `kubelite join` command, not just the token")
    token_create.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    join = sub.add_parser("join", help="join this machine to a cluster as a node (bootstrap token + CSR)")
    join.add_argument("--server", required=True,
                      help="the API server's URL, e.g. https://10.0.0.1:6443; several, comma-separated, for an HA "
                           "control plane (the node's agent fails over between them)")
    join.add_argument("--token", required=True, help="a bootstrap token from `kubelite token create`")
    join.add_argument("--ca-cert-hash", action="append", default=[], required=True,
                      help="sha256:HEX of the cluster CA's public key (repeatable)")
    join.add_argument("--node-name", default=socket.gethostname().lower())
    join.add_argument("--data-dir", type=Path, default=default_data_dir() / "node",
                      help="the node's kubeconfig, certificate and agent state")
    join.add_argument("--address", default="127.0.0.1", help="this node's address (pods use the host network)")
    join.add_argument("--port", type=port_number, default=KUBELET_PORT,
                      help=f"the agent's endpoint (logs, exec, metrics): kubelet's {KUBELET_PORT}; 0: any free port")
    join.add_argument("--node-config", type=Path, help="KubeletConfiguration file")
    join.add_argument("--proxy-mode", choices=["nftables", "none"], default="nftables")
    join.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    explain = sub.add_parser("explain", help="explain a pod's scheduling: per node, per plugin")
    explain.add_argument("kind", choices=["pod", "pods", "po"])
    explain.add_argument("name")
    explain.add_argument("-n", "--namespace", default="default")
    explain.add_argument("--kubeconfig", type=Path, default=None,
                         help="default: $KUBECONFIG, else the local cluster's kubeconfig")
    explain.add_argument("--config", type=Path, help="KubeSchedulerConfiguration to evaluate with")
    explain.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sim_cli.add_parser(sub)
    return root


def server_urls(args: argparse.Namespace) -> tuple[str, ...]:
    """--server's URLs (none: the kubeconfig's server)."""
    return tuple(u.strip() for u in args.server.split(",") if u.strip())


def join_agent_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The flags `kubelite join` hands on to the agent it starts."""
    return ("--proxy-mode", args.proxy_mode, "--port", str(args.port),
            *(("--node-config", str(args.node_config)) if args.node_config else ()))


def main(argv: list[str] | None = None) -> int:
    interrupts.note()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the command installed its own handler (while importing)
        # Exit here, not through the interpreter's shutdown: after a KeyboardInterrupt raised inside an import
        # and caught here, CPython 3.11 still ends about one such start in ten by killing itself with SIGINT
        # (exit -2, seen in CI and reproduced with tests/e2e/test_shutdown.py), and a script then reads a
        # different status for the same Ctrl-C. Every command that starts something long-lived handles SIGINT
        # itself (stop_on_signals); what reaches here has registered no atexit work, and its finally blocks ran.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kubelite").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if args.command == "sim":
        return sim_cli.main(args)
    if args.command == "explain":
        from kubelite.api.errors import ApiError
        from kubelite.cli import explain

        kubeconfig = args.kubeconfig or Path(os.environ.get("KUBECONFIG") or default_data_dir() / "kubeconfig")
        try:
            print(asyncio.run(explain.explain_pod(kubeconfig, args.namespace, args.name, args.config)))
        except ApiError as exc:
            print(f"Error from server ({exc.reason}): {exc.message}", file=sys.stderr)
            return 1
        return 0
    if args.command == "token":
        from kubelite.cli import join as joining

        kubeconfig = args.kubeconfig or Path(os.environ.get("KUBECONFIG") or default_data_dir() / "kubeconfig")
        return joining.token_create(kubeconfig, args.ttl, args.print_join_command, args.description)
    if args.command == "join":
        from kubelite.cli import join as joining

        return joining.join(joining.JoinOptions(server_urls(args), args.token, tuple(args.ca_cert_hash), args.node_name,
                                                args.data_dir, args.address, join_agent_args(args)))
    if args.command == "agent":
        from kubelite.agent.config import NodeConfigError
        from kubelite.cli import components

        try:
            return components.run_agent(args.kubeconfig, args.node_name, args.data_dir, args.node_config,
                                        args.address, args.port, args.shutdown_grace_period, args.protect_path,
                                        args.proxy_mode, args.client_ca_file, args.self_fence_after,
                                        server_urls(args))
        except NodeConfigError as exc:
            print(f"kubelite: {exc}", file=sys.stderr)
            return 2
    if args.command == "scheduler":
        from kubelite.cli import components
        from kubelite.scheduler.config import ConfigError

        try:
            return components.run_scheduler(args.kubeconfig, args.config, args.seed, args.leader_elect,
                                            args.metrics_bind_address, server_urls(args), _timing(args))
        except (ConfigError, UsageError) as exc:
            print(f"kubelite: {exc}", file=sys.stderr)
            return 2
    if args.command == "controller-manager":
        from kubelite.cli import components
        from kubelite.controllers.manager import select

        try:
            names = select(args.controllers)
        except ValueError as exc:
            print(f"kubelite: --controllers: {exc}", file=sys.stderr)
            return 2
        from kubelite.controllers.fencing_config import FencingConfigError

        try:
            return components.run_controller_manager(args.kubeconfig, names, args.leader_elect,
                                                     args.metrics_bind_address, args.fencing_config,
                                                     server_urls(args), _timing(args),
                                                     args.use_service_account_credentials)
        except FencingConfigError as exc:
            print(f"kubelite: --fencing-config: {exc}", file=sys.stderr)
            return 2
        except UsageError as exc:
            print(f"kubelite: {exc}", file=sys.stderr)
            return 2
    disabled = {c for c in args.disable.split(",") if c}
    unknown = disabled - set(COMPONENTS)
    if unknown:
        print(f"kubelite: unknown component(s) for --disable: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    from kubelite.cli import serve
    from kubelite.controllers.fencing_config import FencingConfigError
    from kubelite.store import StoreSpec

    try:
        return serve.run(serve.Options(data_dir=args.data_dir, port=args.port, bind=args.bind_address,
                                       advertise=args.advertise_address or "",
                                       insecure=args.insecure, disabled=frozenset(disabled),
                                       auth=serve.AuthOptions(
                                           token_auth_file=args.token_auth_file, client_ca_file=args.client_ca_file,
                                           anonymous=args.anonymous_auth,
                                           service_account_issuer=args.service_account_issuer,
                                           service_account_signing_key_file=args.service_account_signing_key_file,
                                           service_account_key_files=tuple(args.service_account_key_file),
                                           api_audiences=tuple(a for a in args.api_audiences.split(",") if a),
                                           service_account_jwks_uri=args.service_account_jwks_uri,
                                           authorization_mode=args.authorization_mode),
                                       scheduler_config=args.scheduler_config,
                                       node_config=getattr(args, "node_config", None),
                                       local_node=args.command == "up",
                                       node_monitor_grace_period=args.node_monitor_grace_period,
                                       hpa_sync_period=args.horizontal_pod_autoscaler_sync_period,
                                       service_cidr=args.service_cluster_ip_range, event_ttl=args.event_ttl,
                                       encryption_key_file=args.encryption_key_file,
                                       store=StoreSpec(args.store, args.etcd_cafile, args.etcd_certfile,
                                                       args.etcd_keyfile),
                                       fencing_config=args.fencing_config,
                                       leader_elect=args.leader_elect, lease=_timing(args)))
    except (serve.ConfigError, serve.NodeConfigError, serve.EncryptionConfigError, serve.TransformError,
            FencingConfigError, UsageError) as exc:
        print(f"kubelite: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
