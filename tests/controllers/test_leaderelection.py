"""Leader election on a Lease against a real API server, time on FakeClock (leaderelection_test.go cases)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest

from kubelite.api.errors import unavailable
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import FakeClock
from kubelite.controllers.leaderelection import LeaderElector, LeadershipLost, micro_time

Obj = dict[str, Any]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def elector(client: InProcessClient, clock: FakeClock, who: str, **kw: Any) -> LeaderElector:
    return LeaderElector(client, clock, "kube-system", "kube-controller-manager", who, **kw)


@pytest.mark.parametrize(("existing", "observed_age", "want", "want_holder", "want_transitions"), [
    pytest.param(None, None, True, "me", 0, id="acquire from no object"),
    pytest.param({"holderIdentity": ""}, None, True, "me", 1, id="acquire from unled object"),
    pytest.param({"holderIdentity": "bing", "leaseDurationSeconds": 15}, 20.0, True, "me", 1,
                 id="acquire from led, unacked object (expired)"),
    pytest.param({"holderIdentity": "bing", "leaseDurationSeconds": 15}, 5.0, False, "bing", 0,
                 id="don't acquire from led, acked object"),
    pytest.param({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 3}, 5.0, True, "me", 3,
                 id="renew already acquired object"),
])
async def test_try_acquire_or_renew(client: InProcessClient, existing: Obj | None, observed_age: float | None,
                                    want: bool, want_holder: str, want_transitions: int) -> None:
    """TestTryAcquireOrRenewLeases: expiry is judged by when this candidate saw the record change."""
    clock = FakeClock()
    le = elector(client, clock, "me")
    if existing is not None:
        spec = {"leaseTransitions": 0, "renewTime": micro_time(clock.now()), **existing}
        await client.create(LEASES, {"metadata": {"name": "kube-controller-manager"}, "spec": spec})
        if observed_age is not None:
            assert not (await le.try_acquire_or_renew()) or existing["holderIdentity"] == "me"
            await clock.advance(observed_age)
    assert await le.try_acquire_or_renew() is want
    spec = (await client.get(f"{LEASES}/kube-controller-manager"))["spec"]
    assert (spec["holderIdentity"], spec.get("leaseTransitions", 0)) == (want_holder, want_transitions)
    assert le.is_leader is want


class Outage(InProcessClient):
    """The real server, unreachable while `down` is set."""

    down = False

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      params: Mapping[str, str] | None = None) -> Any:
        if self.down:
            raise unavailable("connection refused")
        return await super().request(method, path, body, content_type, params)


async def advance(clock: FakeClock, seconds: float, step: float = 0.5) -> None:
    """Move fake time in steps, letting the real server answer in between (its writes settle on real time)."""
    for _ in range(int(seconds / step)):
        await clock.advance(step)
        await asyncio.sleep(0.01)


async def test_leader_that_cannot_renew_stops_before_the_lease_expires(client: InProcessClient) -> None:
    """Renewal fails for renewDeadline (10 s): the work is cancelled and LeadershipLost raised — before a
    standby may take over (15 s after it last saw the record change)."""
    clock = FakeClock()
    flaky = Outage(client.server)  # type: ignore[attr-defined]
    leader = elector(flaky, clock, "a")
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(leader.run(work))
    await advance(clock, 1)
    assert leader.is_leader
    standby = elector(client, clock, "b")
    assert not await standby.try_acquire_or_renew()  # observes the record now
    flaky.down = True
    await advance(clock, 12)
    assert cancelled.is_set()
    with pytest.raises(LeadershipLost):
        await task
    assert not await standby.try_acquire_or_renew()  # 12 s < 15 s: still not expired for the standby
    await advance(clock, 4)
    assert await standby.try_acquire_or_renew()


async def test_standby_takes_over_after_release(client: InProcessClient) -> None:
    """One leader at a time; a leader shut down cleanly releases the Lease and the standby leads at once."""
    clock = FakeClock()
    running: list[str] = []

    def work(name: str) -> Any:
        async def lead() -> None:
            running.append(name)
            await asyncio.Event().wait()
        return lead

    first = asyncio.create_task(elector(client, clock, "a").run(work("a")))
    await advance(clock, 1)
    second = asyncio.create_task(elector(client, clock, "b").run(work("b")))
    await advance(clock, 30)
    assert running == ["a"]  # a keeps renewing; b never leads meanwhile
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await advance(clock, 3)
    assert running == ["a", "b"]
    spec = (await client.get(f"{LEASES}/kube-controller-manager"))["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    second.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await second


def test_config_validation() -> None:
    """NewLeaderElector: leaseDuration > renewDeadline > retryPeriod*1.2."""
    with pytest.raises(ValueError, match="leaseDuration"):
        LeaderElector(None, FakeClock(), "ns", "n", "me", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retryPeriod"):
        LeaderElector(None, FakeClock(), "ns", "n", "me", renew_deadline=2, retry_period=2)  # type: ignore[arg-type]
