"""How the API server reaches a node's agent (kube-apiserver's kubelet client): endpoint and credentials.

The endpoint is the node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`. The
connection is TLS with the API server's client certificate (`pki.ensure_agent_client`), which the
agent requires of every caller but /healthz. As kube-apiserver without
--kubelet-certificate-authority, the agent's self-signed serving certificate is not verified:
the agent authenticates the API server, not the other way round (partial: see README).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from kubelite.api import errors
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.core import NODES
from kubelite.apiserver.rest import Registry


def client_context(cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """TLS towards agents, presenting `cert` when given (without one every agent answers 401).

    create_default_context's settings without its load_default_certs: the agent's certificate is not verified
    (CERT_NONE), so the system's CA bundle would never be read, and loading it cost 0.12 s of CPU per context
    (two per ApiServer: most of a test server's start-up)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert is not None and key is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


@dataclass(frozen=True)
class Endpoint:
    node: str
    host: str
    port: int


def node_endpoint(node: Obj) -> Endpoint | None:
    """A node's agent endpoint from its status (None when the node reports none)."""
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    address = next((a["address"] for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), None)
    if not port or not address:
        return None
    return Endpoint(node["metadata"]["name"], str(address), int(port))


def endpoint(registry: Registry, pod: Obj, what: str) -> Endpoint:
    """The agent of the node `pod` is bound to; 400 for an unscheduled pod, 503 for a node without an agent."""
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        raise errors.bad_request(f"{what} is waiting to start: ContainerCreating")
    found = node_endpoint(registry.caches[NODES].get("", node_name) or {"metadata": {"name": node_name}})
    if found is None:
        raise errors.ApiError(503, "ServiceUnavailable", f'no node agent serves node "{node_name}"')
    return found
