"""From `etcd://HOST:PORT[,HOST:PORT…]` and the TLS files to one gRPC channel over every member.

One channel, `round_robin` over all members' addresses: calls spread over the cluster, and when a
member dies its subchannel drops out while the others keep serving (etcd forwards writes to the
leader). Host names are resolved once here so that the `ipv4:`/`ipv6:` target can list them all;
with TLS the certificate is checked against the name given, not the address.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

DEFAULT_PORT = 2379
# etcd's server refuses pings more often than every 5s (--grpc-keepalive-min-time); a dead peer that
# sent no RST (a partition, not a crash) is noticed within keepalive time + timeout.
_OPTIONS = [("grpc.lb_policy_name", "round_robin"), ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 5_000), ("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 2_000)]


class EtcdConfigError(ValueError):
    pass


@dataclass(frozen=True)
class EtcdConfig:
    endpoints: tuple[tuple[str, int], ...]
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None

    def channel(self) -> grpc.aio.Channel:
        addresses = [_resolve(host, port) for host, port in self.endpoints]
        families = {a[0] for a in addresses}
        if len(families) != 1:
            raise EtcdConfigError("--store etcd://: endpoints must all be IPv4 or all IPv6")
        scheme = families.pop()
        target = f"{scheme}:" + ",".join(a[1] for a in addresses)
        if self.cafile is None and self.certfile is None:
            return grpc.aio.insecure_channel(target, options=_OPTIONS)
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.cafile.read_bytes() if self.cafile else None,
            private_key=self.keyfile.read_bytes() if self.keyfile else None,
            certificate_chain=self.certfile.read_bytes() if self.certfile else None)
        options: list[tuple[str, Any]] = [*_OPTIONS, ("grpc.ssl_target_name_override", self.endpoints[0][0])]
        return grpc.aio.secure_channel(target, creds, options=options)


def parse_url(url: str, cafile: Path | None = None, certfile: Path | None = None,
              keyfile: Path | None = None) -> EtcdConfig:
    """`etcd://h1:2379,h2:2379` → endpoints; a missing port is etcd's 2379."""
    if not url.startswith("etcd://"):
        raise EtcdConfigError(f"--store: {url!r} is not etcd://HOST:PORT[,HOST:PORT…]")
    endpoints: list[tuple[str, int]] = []
    for part in url.removeprefix("etcd://").rstrip("/").split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or "]" in port:
            host, port = part.strip(), str(DEFAULT_PORT)
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise EtcdConfigError(f"--store: bad etcd endpoint {part!r} (want HOST:PORT)")
        endpoints.append((host, int(port)))
    if (certfile is None) != (keyfile is None):
        raise EtcdConfigError("--etcd-certfile and --etcd-keyfile go together")
    return EtcdConfig(tuple(endpoints), cafile, certfile, keyfile)


def _resolve(host: str, port: int) -> tuple[str, str]:
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        raise EtcdConfigError(f"--store: cannot resolve etcd endpoint {host}: {exc}") from None
    if family == socket.AF_INET6:
        return "ipv6", f"[{sockaddr[0]}]:{port}"
    return "ipv4", f"{sockaddr[0]}:{port}"
