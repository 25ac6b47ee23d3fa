"""What the certificate controllers share: the CertificateSigningRequest informer and work queue
(`CertificateController`, as upstream's pkg/controller/certificates/certificate_controller.go) and the
decision helpers."""

from __future__ import annotations

import abc
import base64
from typing import Any

from cryptography import x509

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.runner import Runner, run_synced

Obj = dict[str, Any]
PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBE_APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
WORKERS = 1


def condition(csr: Obj, kind: str) -> bool:
    return any(c.get("type") == kind for c in (csr.get("status") or {}).get("conditions") or [])


def is_pending(csr: Obj) -> bool:
    return not condition(csr, "Approved") and not condition(csr, "Denied") and not condition(csr, "Failed")


def parse_request(csr: Obj) -> x509.CertificateSigningRequest | None:
    try:
        return x509.load_pem_x509_csr(base64.b64decode((csr.get("spec") or {}).get("request", "")))
    except ValueError:
        return None


class CertificateController(abc.ABC):
    """certificates.CertificateController: queues the requests `wants` picks from the CSR informer, by name,
    and calls `handle` with each one's cached copy; the approver and the signer differ only in those two."""

    def __init__(self, name: str, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[str] = Runner(name, self.sync, clock, WORKERS)
        self.csrs = Informer(client, PATH, clock, Handlers(self._enqueue, lambda old, new: self._enqueue(new)))

    @abc.abstractmethod
    def wants(self, csr: Obj) -> bool:
        """Whether a request, as it was added or updated, is worth a sync (`handle` decides for good)."""

    @abc.abstractmethod
    async def handle(self, csr: Obj) -> None:
        """Act on the cached request (it may have changed since it was queued: check it again)."""

    def _enqueue(self, csr: Obj) -> None:
        if self.wants(csr):
            self.runner.enqueue(csr["metadata"]["name"])

    async def run(self) -> None:
        await run_synced((self.csrs,), (self.runner.run,))

    async def sync(self, name: str) -> None:
        csr = self.csrs.get("", name)
        if csr is not None:
            await self.handle(csr)

    async def put(self, csr: Obj, subresource: str) -> None:
        """Write `csr` to its `subresource` (approval, status); one deleted or changed meanwhile is left alone:
        a change comes back through the informer and is synced again."""
        try:
            await self.client.request("PUT", f"{PATH}/{csr['metadata']['name']}/{subresource}", csr)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
