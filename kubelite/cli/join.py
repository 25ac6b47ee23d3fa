"""`kubelite token create` and `kubelite join`: kubeadm's bootstrap-token flow for adding nodes.

`token create` (as an administrator) stores a bootstrap token Secret in kube-system, publishes the
cluster's CA and address in the `kube-public/cluster-info` ConfigMap (readable by bootstrap tokens and
anonymous users, as kubeadm's bootstrap-signer-clusterinfo Role) and prints the token or the join
command. `join` (on the new machine) reads cluster-info, checks the token's signature over it and the CA
against `--ca-cert-hash` (sha256 of its public key, as kubeadm), then over TLS verified by that CA makes a key
and a CertificateSigningRequest for `system:node:NAME`, waits for the csrapproving and csrsigning
controllers to approve and sign it, writes the agent's kubeconfig (client certificate) and becomes
the agent. cluster-info is read without credentials and trusted only when the bootstrapsigner's JWS
signature for the token checks out, so the token is sent only to a server already verified. As kubeadm, `join`
first refuses a --node-name that is not a DNS-1123 subdomain (ValidateNodeRegistrationOptions), and before any
CSR refuses a name whose Node exists and is Ready (runKubeletStartJoinPhase): else two machines would run the
same node's pods.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from kubelite.agent.certificates import CertificateRequestError, kubeconfig_certificate, request_client_certificate
from kubelite.api.errors import ApiError
from kubelite.api.validation import is_dns1123_subdomain
from kubelite.apiserver import pki
from kubelite.apiserver.auth import bootstraptoken
from kubelite.client.http import ApiClient
from kubelite.clock import Clock, RealClock, rfc3339
from kubelite.controllers.bootstrapsigner import JWS_PREFIX, KUBECONFIG_KEY, detached_token_is_valid

Obj = dict[str, Any]
log = logging.getLogger("kubelite.join")

CLUSTER_INFO_ROLE = "kubeadm:bootstrap-signer-clusterinfo"
DISCOVERY_WAIT = 300.0  # kubeadm's discovery timeout (5 min)
POLL = 0.5
RETRY_LOG_INTERVAL = 5.0  # kubeadm's discovery retry interval: a "will try again" line at most this often


class JoinError(Exception):
    """A join that cannot go on (wrong CA, refused token, denied request): its message is for the user."""


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def token_secret(token: str, ttl: float, now: float, description: str) -> Obj:
    token_id, token_secret_value = token.split(".")
    data = {"token-id": token_id, "token-secret": token_secret_value,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": bootstraptoken.DEFAULT_NODE_GROUP, "description": description}
    if ttl > 0:
        data["expiration"] = rfc3339(now + ttl)
    return {"apiVersion": "v1", "kind": "Secret", "type": bootstraptoken.SECRET_TYPE,
            "metadata": {"name": bootstraptoken.SECRET_PREFIX + token_id, "namespace": bootstraptoken.NAMESPACE},
            "data": {k: _b64(v) for k, v in data.items()}}


def cluster_info_objects(server: str, ca_pem: bytes) -> list[tuple[str, Obj]]:
    """The ConfigMap, Role and RoleBinding kubeadm's bootstrap-token phase creates in kube-public."""
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "", "cluster": {
        "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "contexts": [], "users": [], "current-context": "", "preferences": {}}
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public"
    return [
        ("/api/v1/namespaces/kube-public/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info"},
            "data": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)}}),
        (f"{rbac}/roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                           "metadata": {"name": CLUSTER_INFO_ROLE}, "rules": [
                               {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"],
                                "verbs": ["get"]}]}),
        (f"{rbac}/rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                  "metadata": {"name": CLUSTER_INFO_ROLE},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": CLUSTER_INFO_ROLE},
                                  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                                "name": "system:anonymous"},
                                               {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                                "name": bootstraptoken.GROUP}]}),
    ]


async def create_token(kubeconfig: Path, ttl: float, description: str, clock: Clock) -> tuple[str, str, str]:
    """Store a new token and publish cluster-info; (token, server URL, CA hash)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    server, ca_pem = cluster["server"], base64.b64decode(cluster["certificate-authority-data"])
    client = ApiClient.from_kubeconfig(kubeconfig)
    try:
        for path, obj in cluster_info_objects(server, ca_pem):
            try:
                await client.create(path, obj)
            except ApiError as exc:
                if exc.code != 409:  # already published by an earlier `token create`
                    raise
        token = bootstraptoken.generate()
        await client.create(f"/api/v1/namespaces/{bootstraptoken.NAMESPACE}/secrets",
                            token_secret(token, ttl, clock.now(), description))
    finally:
        await client.close()
    return token, server, pki.ca_cert_hash(ca_pem)


def token_create(kubeconfig: Path, ttl: float, print_join_command: bool, description: str) -> int:
    try:
        token, server, ca_hash = asyncio.run(create_token(kubeconfig, ttl, description, RealClock()))
    except (ApiError, OSError, KeyError) as exc:
        print(f"kubelite token create: {exc}", file=sys.stderr)
        return 1
    print(f"kubelite join --server {server} --token {token} --ca-cert-hash {ca_hash}" if print_join_command
          else token)
    return 0


@dataclass(frozen=True)
class JoinOptions:
    servers: tuple[str, ...]  # --server: one URL, or several of an HA control plane (the client fails over)
    token: str
    ca_cert_hashes: tuple[str, ...]
    node_name: str
    data_dir: Path
    address: str = "127.0.0.1"
    agent_args: tuple[str, ...] = ()  # passed on to `kubelite agent`


class ClusterInfoFetch(Protocol):
    async def __call__(self, ca_pem: bytes | None) -> Obj: ...


async def get_cluster_info(fetch: ClusterInfoFetch, ca_pem: bytes | None, token_id: str, clock: Clock,
                           timeout: float) -> Obj:
    """getClusterInfo: cluster-info once it carries a signature for the token (the bootstrapsigner adds it a
    little after the token is created), retried every POLL until `timeout`; then the last error."""
    deadline = clock.monotonic() + timeout
    said, said_at = "", 0.0
    while True:
        try:
            info = await fetch(ca_pem)
            if JWS_PREFIX + token_id in (info.get("data") or {}):
                return info
            last = f"could not find a JWS signature in the cluster-info ConfigMap for token ID {token_id!r}"
            retry = f'The cluster-info ConfigMap does not yet contain a JWS signature for token ID "{token_id}"'
        except ApiError as exc:
            last = f"failed to request the cluster-info ConfigMap: {exc}"
            retry = f"Failed to request cluster-info: {exc}"
        if clock.monotonic() >= deadline:
            raise JoinError(last)
        # kubeadm logs each retry; polling faster than it, say a new reason at once and a repeated one every
        # RETRY_LOG_INTERVAL, so a join waiting on an unknown token is visibly waiting, and on what
        if retry != said or clock.monotonic() - said_at >= RETRY_LOG_INTERVAL:
            log.info("[discovery] %s, will try again", retry)
            said, said_at = retry, clock.monotonic()
        await clock.sleep(POLL)


def validate_cluster_info_token(info: Obj, token: str) -> str:
    """validateClusterInfoToken: cluster-info's kubeconfig, when the token's JWS signature over it checks out."""
    token_id, token_secret = token.split(".", 1)
    data = info.get("data") or {}
    content = data.get(KUBECONFIG_KEY)
    if not content:
        raise JoinError(f"there is no {KUBECONFIG_KEY} key in the cluster-info ConfigMap. This API Server isn't set "
                        "up for token bootstrapping, can't connect")
    detached = data.get(JWS_PREFIX + token_id)
    if not detached:
        raise JoinError(f"token id {token_id!r} is invalid for this cluster or it has expired. Use \"kubelite token "
                        "create\" on the control-plane node to create a new valid token")
    if not detached_token_is_valid(detached, content, token_id, token_secret):
        raise JoinError("failed to verify JWS signature of received cluster info object, can't trust this API Server")
    return str(content)


def validate_cluster_ca(content: str, ca_cert_hashes: tuple[str, ...]) -> bytes:
    """validateClusterCA: the kubeconfig's CA, when its public key's hash is one of --ca-cert-hash."""
    try:
        config = yaml.safe_load(content)
        ca_pem = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        found = pki.ca_cert_hash(ca_pem)
    except (KeyError, IndexError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise JoinError(f"malformed kubeconfig in the cluster-info ConfigMap: {exc}") from None
    if found not in ca_cert_hashes:
        raise JoinError(f"cluster CA found in cluster-info ConfigMap is invalid: none of the public keys "
                        f"\"{found}\" are pinned")
    return ca_pem


async def retrieve_validated_ca(fetch: ClusterInfoFetch, token: str, ca_cert_hashes: tuple[str, ...], clock: Clock,
                                timeout: float = DISCOVERY_WAIT) -> bytes:
    """kubeadm's token discovery (retrieveValidatedConfigInfo): read cluster-info without credentials over
    unverified TLS, check the token's signature and the CA's pin, then read it again over TLS verified by that
    CA and require the same kubeconfig. The token itself is never sent before the server is trusted."""
    if bootstraptoken.TOKEN_RE.match(token) is None:
        raise JoinError(f"the bootstrap token {token!r} was not of the form {bootstraptoken.TOKEN_RE.pattern}")
    token_id = token.split(".", 1)[0]
    insecure = await get_cluster_info(fetch, None, token_id, clock, timeout)
    content = validate_cluster_info_token(insecure, token)
    ca_pem = validate_cluster_ca(content, ca_cert_hashes)
    secure = await get_cluster_info(fetch, ca_pem, token_id, clock, timeout)
    if (secure.get("data") or {}).get(KUBECONFIG_KEY) != content:
        raise JoinError("the second kubeconfig from the cluster-info ConfigMap (using validated TLS) was different "
                        "from the first")
    return ca_pem


async def discover_ca(opts: JoinOptions, clock: Clock) -> bytes:
    """The cluster's CA, read from the server at --server and trusted by the token's signature and the pin."""
    async def fetch(ca_pem: bytes | None) -> Obj:
        client = ApiClient(list(opts.servers), None, ca_pem)  # no credentials; unverified TLS until the CA is known
        try:
            return await client.get(bootstraptoken.CLUSTER_INFO_PATH)
        finally:
            await client.close()

    return await retrieve_validated_ca(fetch, opts.token, opts.ca_cert_hashes, clock)


def validate_node_name(name: str) -> None:
    """ValidateNodeRegistrationOptions: the name must be a DNS-1123 subdomain, as a Node's (else the CSR would be
    approved and the agent's registration refused with a 422 for ever). Upstream's field error, aggregated."""
    if not name:
        raise JoinError("nodeRegistration: Required value: --node-name or .nodeRegistration.name in the config file "
                        "is a required value. It seems like this value couldn't be automatically detected in your "
                        "environment, please specify the desired value using the CLI or config file.")
    errs = [f'nodeRegistration.name: Invalid value: "{name}": {e}' for e in is_dns1123_subdomain(name)]
    if errs:
        raise JoinError(errs[0] if len(errs) == 1 else f"[{', '.join(errs)}]")


class NodeGetter(Protocol):
    """All refuse_ready_node needs of a client (the bootstrap token's ApiClient; a table of Nodes in tests)."""

    async def get(self, path: str) -> Obj: ...


async def refuse_ready_node(client: NodeGetter, node_name: str) -> None:
    """runKubeletStartJoinPhase's check, with the bootstrap token (kubeadm:get-nodes): a Node of this name that
    is Ready is some other machine's, running its pods; joining under its name would run them twice. A NotReady
    or missing Node may be taken over (a machine rejoining after `kubectl delete node` or a reinstall).
    Like upstream, this is a check before the CSR, not a lock: two joins of one new name at once both pass."""
    try:
        node = await client.get(f"/api/v1/nodes/{node_name}")
    except ApiError as exc:
        if exc.code == 404:
            return
        raise JoinError(f'cannot get Node "{node_name}": {exc}') from None
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            raise JoinError(f'a Node with name "{node_name}" and status "Ready" already exists in the cluster. '
                            "You must delete the existing Node or change the name of this new joining Node")


async def request_certificate(opts: JoinOptions, ca_pem: bytes, clock: Clock,
                              check_node: bool) -> tuple[bytes, bytes, str]:
    """The node's first certificate, requested with the bootstrap token over TLS verified by the CA (after
    refuse_ready_node when `check_node`); and the server that answered (of several, the first live one), which
    the node's kubeconfig names."""
    client = ApiClient(list(opts.servers), opts.token, ca_pem)
    try:
        if check_node:
            await refuse_ready_node(client, opts.node_name)
        cert, key = await request_client_certificate(client, opts.node_name, clock)
        return cert, key, client.server
    except CertificateRequestError as exc:
        raise JoinError(str(exc)) from None
    finally:
        await client.close()


async def bootstrap(opts: JoinOptions, clock: Clock) -> Path:
    """The agent's kubeconfig, bootstrapped unless an earlier join left one whose client certificate is still
    valid (a restart reuses it; an expired one is replaced with the bootstrap token, as kubelet's LoadClientCert
    with isClientConfigStillValid — the agent exits when its certificate expires for this restart to happen)."""
    validate_node_name(opts.node_name)
    kubeconfig = opts.data_dir / "kubeconfig"
    if still_valid(kubeconfig, clock.now()):
        return kubeconfig
    # a kubeconfig left here (expired, unreadable) means this machine joined before: bootstrapping again is
    # kubelet's own renewal, which kubeadm's Ready check does not guard (its Node may still look Ready for a
    # grace period after its certificate expired); a data dir without one is a new join, checked
    first_join = not kubeconfig.exists()
    ca_pem = await discover_ca(opts, clock)
    cert, key, server = await request_certificate(opts, ca_pem, clock, check_node=first_join)
    opts.data_dir.mkdir(parents=True, exist_ok=True)
    opts.data_dir.chmod(0o700)
    ca_path = opts.data_dir / "ca.crt"
    ca_path.write_bytes(ca_pem)
    pki.write_kubeconfig(kubeconfig, server, None, ca_path, (cert, key))
    return kubeconfig


def still_valid(kubeconfig: Path, now: float) -> bool:
    """isClientConfigStillValid: the kubeconfig exists, its client certificate and key can be read and belong
    together (TLSConfigFor loads the pair), and the certificate has not expired; an unreadable one is
    bootstrapped over (and said so), as upstream."""
    if not kubeconfig.exists():
        return False
    try:
        pair = kubeconfig_certificate(kubeconfig)
        if pair is None:
            raise ValueError("it has no client certificate")
        cert = x509.load_pem_x509_certificate(pair[0])
        key = serialization.load_pem_private_key(pair[1], password=None)
        if _public(key.public_key()) != _public(cert.public_key()):
            raise ValueError("its client key does not match its certificate")
    # AttributeError, TypeError: YAML that is not a kubeconfig's shape (a string, a list where a map goes)
    except (OSError, ValueError, KeyError, AttributeError, TypeError, yaml.YAMLError) as exc:
        log.warning("unable to read the client certificate of the existing kubeconfig %s (%s): bootstrapping "
                    "again", kubeconfig, exc)
        return False
    if now > cert.not_valid_after_utc.timestamp():
        log.warning("the client certificate in %s expired at %s: bootstrapping again with the token", kubeconfig,
                    cert.not_valid_after_utc.isoformat())
        return False
    return True


def _public(key: PublicKeyTypes) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def join(opts: JoinOptions) -> int:
    try:
        kubeconfig = asyncio.run(bootstrap(opts, RealClock()))
    except (JoinError, OSError) as exc:
        print(f"kubelite join: {exc}", file=sys.stderr)
        return 1
    print(f"kubelite: node {opts.node_name} joined {', '.join(opts.servers)}; starting its agent", flush=True)
    argv = [sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(kubeconfig), "--node-name",
            opts.node_name, "--data-dir", str(opts.data_dir / "agent"), "--address", opts.address,
            *(["--server", ",".join(opts.servers)] if len(opts.servers) > 1 else []), *opts.agent_args]
    os.execv(sys.executable, argv)
