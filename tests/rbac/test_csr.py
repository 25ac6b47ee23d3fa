"""CertificateSigningRequests through a real API server with RBAC, and the approver's and signer's decisions:
the requester's identity written into the spec, /approval's rules (no undoing, not both), the status keeping
decisions, the node client checks of the csrapproving controller (isNodeClientCert) and signing."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelite.agent.certificates import node_certificate_request
from kubelite.apiserver import pki
from kubelite.controllers.csrapproving import is_node_client_cert
from kubelite.controllers.csrsigning import sign
from tests.rbac.test_rbac_api import api, call, served

__all__ = ["api", "served"]  # the fixtures
Client = TestClient  # type: ignore[type-arg]
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def request_pem(cn: str, orgs: list[str], sans: list[str] | None = None) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] + [x509.NameAttribute(NameOID.COMMON_NAME,
                                                                                                cn)]))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr(name: str, pem: bytes, usages: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "usages": usages or ["client auth"],
                     "signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": "forged"}}


def decision(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return {**obj, "status": {"conditions": [{"type": kind, "status": "True", "reason": "Test"}]}}


async def test_requester_is_written_into_the_spec(api: Client) -> None:
    created = await call(api, "POST", CSRS, csr("c1", request_pem("system:node:n1", ["system:nodes"])), expect=201)
    assert created["spec"]["username"] == "kubernetes-admin"
    assert created["spec"]["groups"] == ["system:masters", "system:authenticated"]


async def test_invalid_request_is_refused(api: Client) -> None:
    body = csr("c1", b"not a csr")
    out = await call(api, "POST", CSRS, body, expect=422)
    assert out["details"]["causes"][0]["field"] == "spec.request"


APPROVAL = [
    ("approve", ["Approved"], 200),
    ("deny", ["Denied"], 200),
    ("approve then deny: a decision cannot be undone", ["Approved", "Denied"], 422),
]


@pytest.mark.parametrize("name,steps,last_code", APPROVAL, ids=[c[0] for c in APPROVAL])
async def test_approval(api: Client, name: str, steps: list[str], last_code: int) -> None:
    obj = await call(api, "POST", CSRS, csr("c1", request_pem("system:node:n1", ["system:nodes"])), expect=201)
    for i, kind in enumerate(steps):
        code = last_code if i == len(steps) - 1 else 200
        out = await call(api, "PUT", f"{CSRS}/c1/approval", decision(obj, kind), expect=code)
        if code == 200:
            obj = out
    # a status update (the signer's) keeps the decision
    signed = {**obj, "status": {"certificate": base64.b64encode(b"x").decode()}}
    out = await call(api, "PUT", f"{CSRS}/c1/status", signed, expect=200)
    assert [c["type"] for c in out["status"]["conditions"]] == steps[:1]


async def test_approval_needs_approve_on_the_signer(api: Client) -> None:
    await call(api, "POST", CSRS, csr("c1", request_pem("system:node:n1", ["system:nodes"])), expect=201)
    obj = await call(api, "GET", f"{CSRS}/c1")
    await call(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": "alice-csr"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                       "kind": "ClusterRole", "name": "cluster-admin-csr"},
        "subjects": [{"kind": "User", "name": "alice"}]}, expect=201)
    await call(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "metadata": {"name": "cluster-admin-csr"}, "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": [
            "certificatesigningrequests", "certificatesigningrequests/approval"], "verbs": ["*"]}]}, expect=201)
    out = await call(api, "PUT", f"{CSRS}/c1/approval", decision(obj, "Approved"), token="alice-token", expect=403)
    assert out["message"].endswith('user not permitted to approve requests with signerName '
                                   '"kubernetes.io/kube-apiserver-client-kubelet"')


NODE_CLIENT = [  # TestIsNodeClientCert
    ("good", request_pem("system:node:foo", ["system:nodes"]), ["client auth", "digital signature"], True),
    ("no client auth usage", request_pem("system:node:foo", ["system:nodes"]), ["digital signature"], False),
    ("server auth usage", request_pem("system:node:foo", ["system:nodes"]), ["client auth", "server auth"], False),
    ("extra org", request_pem("system:node:foo", ["system:nodes", "foo"]), ["client auth"], False),
    ("wrong org", request_pem("system:node:foo", ["foo"]), ["client auth"], False),
    ("wrong cn", request_pem("foo", ["system:nodes"]), ["client auth"], False),
    ("dns san", request_pem("system:node:foo", ["system:nodes"], ["foo.example.com"]), ["client auth"], False),
]


@pytest.mark.parametrize("name,pem,usages,ok", NODE_CLIENT, ids=[c[0] for c in NODE_CLIENT])
def test_is_node_client_cert(name: str, pem: bytes, usages: list[str], ok: bool) -> None:
    assert is_node_client_cert({"spec": {"usages": usages}}, x509.load_pem_x509_csr(pem)) is ok


def test_signed_certificate_carries_the_request_subject(tmp_path: Any) -> None:
    pki.ensure_pki(tmp_path, ["127.0.0.1"])
    _, csr_pem = node_certificate_request("n1")
    cert = x509.load_pem_x509_certificate(sign(x509.load_pem_x509_csr(csr_pem), ["client auth"],
                                               (tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes(),
                                               1_800_000_000.0, 3600))
    assert cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() == 3600 + 300
