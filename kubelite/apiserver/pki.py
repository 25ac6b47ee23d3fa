"""First-start security material: a CA, a serving certificate, an admin token, a kubeconfig.

Generated once into the data dir and reused; kubectl needs TLS to send a bearer token
at all (research/kubectl-compat.md), so HTTPS with a token is the default.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import secrets
import socket
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    if private:
        os.chmod(tmp, 0o600)
    tmp.replace(path)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def ensure_pki(pki: Path, hosts: list[str]) -> tuple[Path, Path, Path]:
    """Return (ca.crt, server.crt, server.key), creating what is missing.

    The CA (ca.crt, ca.key) is made once. The serving certificate is issued by that CA when it is missing or
    does not name every one of `hosts`: several API servers of one cluster share the CA (its files copied
    from the first server, README "Many machines: several API servers"), and each then serves a certificate
    valid for its own address.
    """
    ca_crt, ca_key_path, srv_crt, srv_key = pki / "ca.crt", pki / "ca.key", pki / "server.crt", pki / "server.key"
    if not (ca_crt.exists() and ca_key_path.exists()):
        _make_ca(ca_crt, ca_key_path)
    names = _server_names(hosts)
    if srv_crt.exists() and srv_key.exists() and names <= _subject_alt_names(srv_crt):
        return ca_crt, srv_crt, srv_key
    ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = dt.datetime.now(dt.UTC)
    key = _key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName(sorted(names, key=str)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(srv_key, _pem_key(key), private=True)
    _write(srv_crt, cert.public_bytes(serialization.Encoding.PEM))
    return ca_crt, srv_crt, srv_key


def _make_ca(ca_crt: Path, ca_key_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubelite-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write(ca_key_path, _pem_key(ca_key), private=True)
    _write(ca_crt, ca.public_bytes(serialization.Encoding.PEM))


def _server_names(hosts: list[str]) -> set[x509.GeneralName]:
    """The serving certificate's SANs: localhost, the in-cluster names, this machine's name, and `hosts`."""
    names: set[x509.GeneralName] = {x509.DNSName("localhost"), x509.DNSName("kubernetes"),
                                    x509.DNSName(socket.gethostname())}
    for h in {"127.0.0.1", "::1", *hosts}:
        try:
            names.add(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.add(x509.DNSName(h))
    return names


def _subject_alt_names(crt: Path) -> set[x509.GeneralName]:
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    try:
        return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return set()


def ensure_service_account_key(pki: Path) -> Path:
    """The service-account token signing key (`sa.key`), created on first start; its public half verifies the tokens
    (--service-account-key-file defaults to it). RSA 2048 as kubeadm's: tokens are verified on every request and
    signed once per token, and RS256 verifies in about a third of ES256's time (benchmarks/auth.py)."""
    path = pki / "sa.key"
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()), private=True)
    return path


def sign_client_certificate(pki: Path, user: str, groups: list[str], days: int = 365) -> tuple[bytes, bytes]:
    """A client certificate (PEM) and its key for `user` (CN) in `groups` (O), signed by the cluster CA: what the
    x509 authenticator accepts. For administrators' kubeconfigs and the tests; joining nodes will use CSRs."""
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, user)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def ensure_token(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    _write(path, token.encode() + b"\n", private=True)
    return token


def write_kubeconfig(path: Path, server: str, token: str | None, ca_crt: Path | None,
                     client_cert: tuple[bytes, bytes] | None = None) -> None:
    """A kubeconfig with a bearer token or a client certificate (PEM certificate and key) as its user."""
    cluster: dict[str, object] = {"server": server}
    if ca_crt is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_crt.read_bytes()).decode()
    user: dict[str, object] = {"token": token} if token else {}
    if client_cert is not None:
        user["client-certificate-data"] = base64.b64encode(client_cert[0]).decode()
        user["client-key-data"] = base64.b64encode(client_cert[1]).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kubelite", "preferences": {},
        "clusters": [{"name": "kubelite", "cluster": cluster}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "kubelite", "context": {"cluster": "kubelite", "user": "admin",
                                                     "namespace": "default"}}],
    }
    _write(path, yaml.safe_dump(config, sort_keys=False).encode(), private=True)


def ensure_agent_client(pki: Path) -> tuple[Path, Path]:
    """Return (client.crt, client.key): the API server's client certificate towards node agents.

    kube-apiserver's --kubelet-client-certificate: signed by the cluster CA, so an agent that trusts
    the CA (its --client-ca-file, by default the CA of its kubeconfig) authenticates the API server
    and answers anyone else 401.
    """
    crt, key_path = pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key"
    if crt.exists() and key_path.exists():
        return crt, key_path
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = dt.datetime.now(dt.UTC)
    key = _key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-kubelet-client")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(key_path, _pem_key(key), private=True)
    _write(crt, cert.public_bytes(serialization.Encoding.PEM))
    return crt, key_path


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's --discovery-token-ca-cert-hash: sha256 of the CA certificate's Subject Public Key Info (DER)."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    spki = ca.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(spki)
    return "sha256:" + digest.finalize().hex()


# controller-manager.kubeconfig is for `kubelite controller-manager --use-service-account-credentials`: its own
# identity only makes the controllers' service accounts and tokens (the system:controller:* roles do the rest)
COMPONENT_IDENTITIES: dict[str, tuple[str, list[str]]] = {
    "scheduler.kubeconfig": ("system:kube-scheduler", []),
    "controller-manager.kubeconfig": ("system:kube-controller-manager", [])}


def write_component_kubeconfigs(pki: Path, server: str, node_name: str) -> None:
    """Kubeconfigs with client certificates for the components run as their own processes (`kubelite scheduler
    --kubeconfig PKI/scheduler.kubeconfig`) and for this machine's node agent
    (`node.kubeconfig`: system:node:NAME in system:nodes), as kubeadm writes scheduler.conf and kubelet.conf.
    Written once; delete them to reissue."""
    identities = {**COMPONENT_IDENTITIES, "node.kubeconfig": (f"system:node:{node_name}", ["system:nodes"])}
    for name, (user, groups) in identities.items():
        path = pki / name
        if not path.exists():
            write_kubeconfig(path, server, None, pki / "ca.crt", sign_client_certificate(pki, user, groups))
