"""The bootstrap token cleaner (pkg/controller/bootstrap/tokencleaner): deletes expired bootstrap token Secrets.

A `bootstrap.kubernetes.io/token` Secret in kube-system whose `expiration` has passed (or does not parse,
as upstream's GetExpiration) is deleted (with its uid as precondition, so a recreated token survives); one
not yet expired is looked at again when it expires. The authenticator already refuses expired tokens:
this only keeps kube-system tidy.
"""

from __future__ import annotations

from kubelite.api.errors import ApiError
from kubelite.client.informer import Handlers, Informer, Key
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers.bootstrap_secrets import NAMESPACE, SECRET_TYPE, get_expiration
from kubelite.controllers.csr import Obj
from kubelite.controllers.runner import Runner, run_synced

WORKERS = 1


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
        left, expired = get_expiration(secret, self.clock.now())
        if not expired:
            if left > 0:
                self.runner.queue.add_after(key, left)
            return
        try:
            await self.client.delete(f"/api/v1/namespaces/{NAMESPACE}/secrets/{key[1]}",
                                     {"preconditions": {"uid": secret["metadata"]["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone already; recreated since (another uid)
                raise
