"""The etcd backend over TLS with client-certificate auth (`--etcd-cafile/--etcd-certfile/--etcd-keyfile`).

A real etcd member serving HTTPS and requiring client certificates signed by its CA: the right
files connect, a missing client certificate or an unknown CA are refused (a clear Unavailable).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubelite.apiserver import pki
from kubelite.store.etcd import EtcdStore, parse_url
from kubelite.store.etcd import store as etcd_store
from kubelite.store.etcd.store import Unavailable
from tests.etcd_cluster import EtcdCluster, Tls


def _client_cert(dir_: Path, ca_crt: Path, ca_key: Path) -> tuple[Path, Path]:
    ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-etcd-client")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(signer, hashes.SHA256()))
    crt_path, key_path = dir_ / "client.crt", dir_ / "client.key"
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return crt_path, key_path


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    base = tmp_path_factory.mktemp("etcd-tls")
    ca, crt, key = pki.ensure_pki(base / "pki", ["127.0.0.1"])
    client_crt, client_key = _client_cert(base / "pki", ca, base / "pki" / "ca.key")
    cluster = EtcdCluster(base, 1, Tls(ca, crt, key, client_crt, client_key))
    cluster.start()
    yield cluster
    cluster.stop()


async def test_client_certificate_connects(tls_etcd: EtcdCluster) -> None:
    assert tls_etcd.tls is not None
    tls = tls_etcd.tls
    store = await EtcdStore.open(parse_url(tls_etcd.url, tls.ca, tls.client_cert, tls.client_key))
    try:
        kv = await store.create("/registry/secrets/default/s", b"{}")
        got = await store.get("/registry/secrets/default/s")
        assert got == kv
    finally:
        await store.close()


def _refused_cases(tls: Tls, other_ca: Path) -> list[tuple[str, Path | None, Path | None, Path | None]]:
    return [
        ("no client certificate", tls.ca, None, None),
        ("CA that did not sign the member's certificate", other_ca, tls.client_cert, tls.client_key),
    ]


async def test_refused_without_the_right_files(tls_etcd: EtcdCluster, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert tls_etcd.tls is not None
    other_ca, _, _ = pki.ensure_pki(tmp_path / "other", ["127.0.0.1"])
    monkeypatch.setattr(etcd_store, "RETRY_FOR", 0.0)  # one attempt, not 30 s of retries
    for name, ca, cert, key in _refused_cases(tls_etcd.tls, other_ca):
        try:
            store = await EtcdStore.open(parse_url(tls_etcd.url, ca, cert, key))
        except Unavailable:
            continue
        await store.close()
        pytest.fail(f"{name}: connected")
