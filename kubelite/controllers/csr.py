"""What the certificate controllers share: the CertificateSigningRequest informer and the decision helpers."""

from __future__ import annotations

import base64
from typing import Any

from cryptography import x509

Obj = dict[str, Any]
PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBE_APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def condition(csr: Obj, kind: str) -> bool:
    return any(c.get("type") == kind for c in (csr.get("status") or {}).get("conditions") or [])


def is_pending(csr: Obj) -> bool:
    return not condition(csr, "Approved") and not condition(csr, "Denied") and not condition(csr, "Failed")


def parse_request(csr: Obj) -> x509.CertificateSigningRequest | None:
    try:
        return x509.load_pem_x509_csr(base64.b64decode((csr.get("spec") or {}).get("request", "")))
    except ValueError:
        return None
