"""The controllers' identities: every controller `kubelite controller-manager` can run has a service account whose
`system:controller:*` role and binding the server bootstraps (controller_policy.go's naming); and under
--use-service-account-credentials a controller runs with its account's client and is restarted with a fresh token
when REFRESH_AT of the token's lifetime has passed."""

from __future__ import annotations

import asyncio
from typing import Any

from kubelite.apiserver.auth.controllerpolicy import (
    PREFIX,
    controller_role_bindings,
    controller_roles,
    namespace_role_bindings,
    namespace_roles,
)
from kubelite.clock import Clock, FakeClock
from kubelite.controllers import saclients
from kubelite.controllers.registry import CONTROLLERS


def test_every_controller_has_an_account_with_a_bound_role() -> None:
    assert set(saclients.ACCOUNTS) == set(CONTROLLERS)
    roles = {r["metadata"]["name"] for r in [*controller_roles(), *namespace_roles()]}
    bound = {(b["roleRef"]["name"], s["name"]) for b in [*controller_role_bindings(), *namespace_role_bindings()]
             for s in b["subjects"] if s["kind"] == "ServiceAccount" and s["namespace"] == "kube-system"}
    for account in saclients.ACCOUNTS.values():
        assert PREFIX + account in roles, account
        assert (PREFIX + account, account) in bound, account


class FakeClient:
    def __init__(self, token: str) -> None:
        self.token = token
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class Credentials(saclients.ServiceAccountCredentials):
    def __init__(self) -> None:
        self.issued: list[FakeClient] = []

    async def client(self, account: str) -> Any:
        self.issued.append(FakeClient(f"{account}-{len(self.issued)}"))
        return self.issued[-1]


async def test_controller_runs_with_its_token_until_renewal() -> None:
    clock = FakeClock()
    used: list[str] = []

    class Controller:
        def __init__(self, client: Any, _clock: Clock) -> None:
            used.append(client.token)

        async def run(self) -> None:
            await asyncio.Event().wait()

    credentials = Credentials()
    factory = saclients.credentialed({"deployment": Controller}, credentials)["deployment"]
    run = asyncio.create_task(factory(object(), clock).run())  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert used == ["deployment-controller-0"] and not run.done()
    await clock.advance(saclients.TOKEN_SECONDS * saclients.REFRESH_AT - 1)
    assert not run.done()
    await clock.advance(1)
    await asyncio.wait_for(run, 1)  # returns: the supervisor starts it again with a new token
    assert credentials.issued[0].closed
