"""Services and EndpointSlices to an nftables ruleset, as kube-proxy's nftables proxier lays it out.

Pure functions: `service_ports` joins Services with their slices (only ready endpoints, the
slice port matching each Service port by name and protocol), `render` writes one `nft -f`
script that atomically replaces the whole table. Layout:

- `services` (from the nat output and prerouting hooks): a verdict map from
  (cluster IP, protocol, port) and, for local destinations, (protocol, node port) to one
  chain per Service port, which DNATs to an endpoint chosen by `numgen random`.
- A Service port without ready endpoints is rejected (ICMP port unreachable, so clients get
  "connection refused" at once) from a filter hook, through the `no-endpoint-*` maps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}


@dataclass(frozen=True, order=True)
class Backend:
    ip: str
    port: int


@dataclass(frozen=True)
class ServicePort:
    namespace: str
    name: str
    port_name: str
    protocol: str  # nft's: tcp, udp, sctp
    cluster_ip: str  # "" when the Service has none (headless, ExternalName)
    port: int
    node_port: int  # 0 when none
    backends: tuple[Backend, ...]

    @property
    def chain(self) -> str:
        """A chain name that is stable, short and valid whatever the Service's names are."""
        digest = hashlib.sha256(f"{self.namespace}/{self.name}/{self.port_name}/{self.protocol}".encode()).hexdigest()
        return f"svc-{digest[:16]}"


def _ready(endpoint: Obj) -> bool:
    """An endpoint traffic may go to: ready (nil means ready, as the API says); terminating ones are never used."""
    conditions = endpoint.get("conditions") or {}
    return conditions.get("ready") is not False and not conditions.get("terminating")


def backends_for(slices: Iterable[Obj], port_name: str, protocol: str) -> tuple[Backend, ...]:
    out: set[Backend] = set()
    for es in slices:
        if es.get("addressType", "IPv4") != "IPv4":
            continue
        number = next((p.get("port") for p in es.get("ports") or []
                       if (p.get("name") or "") == port_name and p.get("protocol", "TCP") == protocol), None)
        if not isinstance(number, int):
            continue
        for ep in es.get("endpoints") or []:
            if _ready(ep) and ep.get("addresses"):
                out.add(Backend(ep["addresses"][0], number))
    return tuple(sorted(out))


def service_ports(services: Iterable[Obj], slices: Iterable[Obj]) -> list[ServicePort]:
    by_service: dict[tuple[str, str], list[Obj]] = {}
    for es in slices:
        name = (es["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            by_service.setdefault((es["metadata"].get("namespace", ""), name), []).append(es)
    out = []
    for svc in services:
        spec, meta = svc.get("spec") or {}, svc["metadata"]
        if spec.get("type") == "ExternalName":
            continue
        cluster_ip = spec.get("clusterIP") or ""
        cluster_ip = "" if cluster_ip == "None" else cluster_ip
        mine = by_service.get((meta.get("namespace", ""), meta["name"]), [])
        for p in spec.get("ports") or []:
            protocol = p.get("protocol", "TCP")
            node_port = p.get("nodePort") or 0
            if protocol not in PROTOCOLS or not (cluster_ip or node_port):
                continue
            out.append(ServicePort(meta.get("namespace", ""), meta["name"], p.get("name") or "", PROTOCOLS[protocol],
                                   cluster_ip, p.get("port", 0), node_port,
                                   backends_for(mine, p.get("name") or "", protocol)))
    return sorted(out, key=lambda s: (s.namespace, s.name, s.port_name, s.protocol))


def _map(name: str, key_type: str, elements: list[str]) -> list[str]:
    lines = [f"  map {name} {{", f"    type {key_type} : verdict"]
    if elements:
        lines.append("    elements = { " + ", ".join(elements) + " }")
    return [*lines, "  }"]


def render(table: str, ports: list[ServicePort]) -> str:
    """An `nft -f` script replacing table `ip <table>` in one transaction (create, delete, define)."""
    ips: list[str] = []
    node_ports: list[str] = []
    no_ips: list[str] = []
    no_node_ports: list[str] = []
    chains: list[str] = []
    for sp in ports:
        if sp.backends:
            target = f"goto {sp.chain}"
            choices = ", ".join(f"{i} : {b.ip} . {b.port}" for i, b in enumerate(sp.backends))
            chains += [f"  chain {sp.chain} {{",
                       f"    meta l4proto {sp.protocol} dnat ip to numgen random mod {len(sp.backends)} map "
                       f"{{ {choices} }}",
                       "  }"]
            ip_list, port_list = ips, node_ports
        else:
            target = "goto reject-chain"
            ip_list, port_list = no_ips, no_node_ports
        if sp.cluster_ip:
            ip_list.append(f"{sp.cluster_ip} . {sp.protocol} . {sp.port} : {target}")
        if sp.node_port:
            port_list.append(f"{sp.protocol} . {sp.node_port} : {target}")
    by_ip = "ipv4_addr . inet_proto . inet_service"
    by_port = "inet_proto . inet_service"
    body = [
        *_map("service-ips", by_ip, ips), *_map("service-nodeports", by_port, node_ports),
        *_map("no-endpoint-services", by_ip, no_ips), *_map("no-endpoint-nodeports", by_port, no_node_ports),
        "  chain reject-chain {", "    reject", "  }",
        "  chain endpoints-check {",
        "    ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
        "    fib daddr type local meta l4proto . th dport vmap @no-endpoint-nodeports",
        "  }",
        "  chain filter-output {", "    type filter hook output priority -110; policy accept;",
        "    ct state new jump endpoints-check", "  }",
        "  chain filter-input {", "    type filter hook input priority -110; policy accept;",
        "    ct state new jump endpoints-check", "  }",
        "  chain services {",
        "    ip daddr . meta l4proto . th dport vmap @service-ips",
        "    fib daddr type local meta l4proto . th dport vmap @service-nodeports",
        "  }",
        "  chain nat-output {", "    type nat hook output priority -100; policy accept;", "    jump services", "  }",
        "  chain nat-prerouting {", "    type nat hook prerouting priority -100; policy accept;", "    jump services",
        "  }",
        *chains,
    ]
    return "\n".join([f"add table ip {table}", f"delete table ip {table}", f"table ip {table} {{", *body, "}", ""])
