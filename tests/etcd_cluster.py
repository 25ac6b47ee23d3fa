"""Real etcd members on free loopback ports in a temporary directory (tests and benchmarks).

Debian's `etcd-server` (scripts/system-deps) provides `etcd`. Each member logs to its own file
beside its data directory; `kill(i)` SIGKILLs one member, as a crashed machine would.
"""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port

START_TIMEOUT = 20.0
PROGRESS_NOTIFY_INTERVAL = "1s"  # etcd's default is 10m: idle watches learn the current revision every second


@dataclass(frozen=True)
class Tls:
    """Serve clients over TLS and require a client certificate signed by `ca`."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path


class EtcdCluster:
    def __init__(self, base: Path, members: int, tls: Tls | None = None) -> None:
        self.base = base
        self.tls = tls
        self.names = [f"m{i}" for i in range(members)]
        self.client_ports = [free_port() for _ in self.names]
        self.peer_ports = [free_port() for _ in self.names]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * members

    @property
    def endpoints(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.client_ports]

    @property
    def url(self) -> str:
        """The `--store` value for `kubelite server`: every member, so clients can fail over."""
        return "etcd://" + ",".join(self.endpoints)

    def start(self) -> None:
        for i in range(len(self.names)):
            self._spawn(i)
        self._wait_healthy()

    def restart(self, i: int) -> None:
        """Start a killed member again on its data directory (it rejoins with what it had)."""
        self._spawn(i)
        self._wait_healthy()

    def _spawn(self, i: int) -> None:
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports, strict=True))
        name = self.names[i]
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_ports[i]}"
        peer = f"http://127.0.0.1:{self.peer_ports[i]}"
        args = [etcd, "--name", name, "--data-dir", str(self.base / name),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--experimental-watch-progress-notify-interval", PROGRESS_NOTIFY_INTERVAL,
                "--log-level", "warn", "--logger", "zap"]
        if self.tls:
            args += ["--cert-file", str(self.tls.cert), "--key-file", str(self.tls.key),
                     "--trusted-ca-file", str(self.tls.ca), "--client-cert-auth"]
        with (self.base / f"{name}.log").open("ab") as log:
            self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        for i, port in enumerate(self.client_ports):
            while True:
                proc = self.procs[i]
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"etcd {self.names[i]} exited: "
                                       f"{(self.base / f'{self.names[i]}.log').read_text(errors='replace')}")
                if _healthy(port, self.tls):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd {self.names[i]} did not become healthy")
                time.sleep(0.05)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for i, proc in enumerate(self.procs):
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill(i)


def _healthy(port: int, tls: Tls | None) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw:
            s = raw
            if tls:
                ctx = ssl.create_default_context(cafile=str(tls.ca))
                ctx.load_cert_chain(tls.client_cert, tls.client_key)
                s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            return b'"health":"true"' in s.recv(4096)
    except OSError:
        return False


def wipe(cluster: EtcdCluster) -> None:
    """Delete every key (revisions keep counting): each contract test starts from an empty keyspace."""
    import grpc
    from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

    alive = [e for e, p in zip(cluster.endpoints, cluster.procs, strict=True) if p is not None and p.poll() is None]
    with grpc.insecure_channel(alive[0]) as channel:
        rpc_pb2_grpc.KVStub(channel).DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"\0", range_end=b"\0"), timeout=10)


_shared: dict[int, EtcdCluster] = {}


def shared(members: int) -> EtcdCluster:
    """One cluster of this size per test session, started on first use and stopped at exit."""
    if members not in _shared:
        import atexit
        import tempfile

        base = Path(tempfile.mkdtemp(prefix=f"etcd{members}-"))
        cluster = EtcdCluster(base, members)
        cluster.start()
        atexit.register(shutil.rmtree, base, True)
        atexit.register(cluster.stop)
        _shared[members] = cluster
    return _shared[members]
