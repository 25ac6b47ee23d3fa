"""The csrapproving controller (pkg/controller/certificates/approver, sarapprove.go).

Approves a pending request to the kubelet client signer that is a node client certificate request
(O = system:nodes only, CN = system:node:NAME, no SANs, usages among client auth, digital
signature, key encipherment, with client auth) when a SubjectAccessReview says its requester may
create `certificatesigningrequests/selfnodeclient` (a node renewing its own certificate) or
`certificatesigningrequests/nodeclient` (a bootstrap token asking for a new node's): the RBAC
bindings, not this controller, decide who may join.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.controllers.csr import KUBELET_CLIENT_SIGNER, CertificateController, Obj, is_pending, parse_request

NODE_CLIENT_USAGES = frozenset({"key encipherment", "digital signature", "client auth"})
SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def is_node_client_cert(csr: Obj, request: x509.CertificateSigningRequest) -> bool:
    """isNodeClientCert."""
    orgs = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    names = [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if orgs != ["system:nodes"] or len(names) != 1 or not names[0].startswith("system:node:"):
        return False
    try:
        request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        return False
    except x509.ExtensionNotFound:
        pass
    usages = set((csr.get("spec") or {}).get("usages") or [])
    return "client auth" in usages and usages <= NODE_CLIENT_USAGES


def common_name(request: x509.CertificateSigningRequest) -> str:
    return str(request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


class CSRApprovingController(CertificateController):
    def __init__(self, client: Client, clock: Clock) -> None:
        super().__init__("csrapproving", client, clock)

    def wants(self, csr: Obj) -> bool:
        return is_pending(csr)

    async def _authorized(self, csr: Obj, subresource: str) -> bool:
        spec = csr.get("spec") or {}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": spec.get("username", ""), "uid": spec.get("uid", ""), "groups": spec.get("groups") or [],
            "extra": spec.get("extra") or {},
            "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                   "verb": "create", "subresource": subresource}}}
        answer = await self.client.create(SAR_PATH, review)
        return bool((answer.get("status") or {}).get("allowed"))

    async def handle(self, csr: Obj) -> None:
        if not is_pending(csr) or (csr.get("spec") or {}).get("signerName") != KUBELET_CLIENT_SIGNER:
            return
        request = parse_request(csr)
        if request is None or not is_node_client_cert(csr, request):
            return
        self_renewal = common_name(request) == (csr.get("spec") or {}).get("username")
        if not await self._authorized(csr, "selfnodeclient" if self_renewal else "nodeclient"):
            return  # not ours to approve: an administrator may still (kubectl certificate approve)
        now = rfc3339(self.clock.now())
        approved = {**csr, "status": {**(csr.get("status") or {}), "conditions": [
            *((csr.get("status") or {}).get("conditions") or []),
            {"type": "Approved", "status": "True", "reason": "AutoApproved",
             "message": "Auto approving kubelet client certificate after SubjectAccessReview.",
             "lastUpdateTime": now, "lastTransitionTime": now}]}}
        await self.put(approved, "approval")
