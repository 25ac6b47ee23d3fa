"""certificates.k8s.io/v1 CertificateSigningRequest (pkg/registry/certificates/certificates).

On create the requester's identity is written into the spec (username, uid, groups, extra), as
upstream's PrepareForCreate, so approvers decide on who asked, never on what the body claims. The
spec is immutable; `/status` carries the issued certificate, `/approval` the Approved/Denied
conditions (kubelite.apiserver.auth.csrapproval serves it), and neither can drop a decision made.
"""

from __future__ import annotations

import base64
import copy

from cryptography import x509

from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.apiserver.auth.context import CURRENT_USER
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBE_APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
DECISIONS = ("Approved", "Denied")


def parse_csr(request: str) -> x509.CertificateSigningRequest:
    """The spec.request (base64 of a PEM CERTIFICATE REQUEST); ValueError when it is not one."""
    pem = base64.b64decode(request, validate=True)
    csr = x509.load_pem_x509_csr(pem)
    if not csr.is_signature_valid:
        raise ValueError("the request's signature is invalid")
    return csr


def decisions(obj: Obj) -> list[Obj]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") in DECISIONS]


class CertificateSigningRequestStrategy(Strategy):
    has_status = True
    # ValidateCertificateRequestName accepts any name; only what every key needs is left (KeyFunc's check)
    name_validator = staticmethod(v.is_path_segment_name)

    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        spec = obj.setdefault("spec", {})
        for key in ("username", "uid", "groups", "extra"):
            spec.pop(key, None)
        user = CURRENT_USER.get()
        if user is not None:
            spec["username"] = user.name
            if user.uid:
                spec["uid"] = user.uid
            if user.groups:
                spec["groups"] = list(user.groups)
            if user.extra:
                spec["extra"] = {k: list(vals) for k, vals in user.extra.items()}

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        spec = obj.get("spec") or {}
        try:
            parse_csr(str(spec.get("request", "")))
        except ValueError as exc:
            causes.append(v.invalid("spec.request", "", f"invalid certificate request: {exc}"))
        signer = spec.get("signerName", "")
        if not signer:
            causes.append(v.required("spec.signerName"))
        elif "/" not in signer:
            causes.append(v.invalid("spec.signerName", signer, "must be a fully qualified domain and path of the "
                                                               "form 'example.com/signer-name'"))
        if not spec.get("usages"):
            causes.append(v.required("spec.usages"))
        seconds = spec.get("expirationSeconds")
        if seconds is not None and (not isinstance(seconds, int) or seconds < 600):
            causes.append(v.invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 600 "
                                                                       "seconds (10 minutes)"))
        return causes

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        new["spec"] = copy.deepcopy(old.get("spec") or {})  # immutable: an update changes metadata only

    def prepare_status_update(self, new: Obj, old: Obj) -> Obj:
        """Only the certificate and the non-decision conditions: Approved/Denied are /approval's."""
        out = super().prepare_status_update(new, old)
        status = out.setdefault("status", {})
        others = [c for c in status.get("conditions") or [] if c.get("type") not in DECISIONS]
        status["conditions"] = decisions(old) + others
        if not status["conditions"]:
            status.pop("conditions")
        return out

    def validate_status_update(self, new: Obj, old: Obj) -> list[Cause]:
        old_cert = (old.get("status") or {}).get("certificate")
        if old_cert and (new.get("status") or {}).get("certificate") != old_cert:
            return [v.invalid("status.certificate", "", "updates may not modify existing certificate content")]
        return []


CERTIFICATE_SIGNING_REQUESTS = Resource("certificates.k8s.io", "v1", "certificatesigningrequests",
                                        "certificatesigningrequest", "CertificateSigningRequest", False,
                                        "V1CertificateSigningRequest", short_names=("csr",),
                                        subresources=("status", "approval"))
