"""The bootstrap token cleaner (pkg/controller/bootstrap/tokencleaner): deletes expired bootstrap token Secrets.

A `bootstrap.kubernetes.io/token` Secret in kube-system whose `expiration` has passed is deleted (with
its uid as precondition, so a recreated token survives); one not yet expired is looked at again when it
expires. The authenticator already refuses expired tokens: this only keeps kube-system tidy.
"""

from __future__ import annotations

import base64
import binascii

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Informer, Key
from kubelite.client.interface import Client
from kubelite.clock import Clock, parse_rfc3339
from kubelite.controllers.csr import Obj
from kubelite.controllers.runner import Runner, run_synced

NAMESPACE = "kube-system"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
WORKERS = 1


def expiration(secret: Obj) -> float | None:
    """The token's expiry (epoch seconds); None when it never expires or the field does not parse."""
    raw = (secret.get("data") or {}).get("expiration")
    if not raw:
        return None
    try:
        return parse_rfc3339(base64.b64decode(raw, validate=True).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


class TokenCleaner:
    def __init__(self, client: Client, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self.runner: Runner[Key] = Runner("token-cleaner", self.sync, clock, WORKERS)
        self.secrets = Informer(client, f"/api/v1/namespaces/{NAMESPACE}/secrets", clock,
                                Handlers(self._enqueue, lambda old, new: self._enqueue(new)),
                                params={"fieldSelector": f"type={SECRET_TYPE}"})

    def _enqueue(self, secret: Obj) -> None:
        self.runner.enqueue((NAMESPACE, secret["metadata"]["name"]))

    async def run(self) -> None:
        await run_synced((self.secrets,), (self.runner.run,))

    async def sync(self, key: Key) -> None:
        secret = self.secrets.get(*key)
        if secret is None or secret.get("type") != SECRET_TYPE:
            return
        expires = expiration(secret)
        if expires is None:
            return
        left = expires - self.clock.now()
        if left > 0:
            self.runner.queue.add_after(key, left)
            return
        try:
            await self.client.delete(f"/api/v1/namespaces/{NAMESPACE}/secrets/{key[1]}",
                                     {"preconditions": {"uid": secret["metadata"]["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone already; recreated since (another uid)
                raise
