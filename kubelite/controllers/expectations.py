"""Controller expectations: what a controller has asked for and not yet seen in its informer.

A port of controller_utils.go's ControllerExpectations and UIDTrackingControllerExpectations.
A ReplicaSet that creates 5 pods must not create 5 more because its informer has not yet
delivered the first 5: before creating it records `add=5`, each pod seen arriving lowers it,
and the controller syncs only when every expectation is met (or, as upstream, when they have
been pending for five minutes — a watch event lost for good must not wedge the controller).
Deletions are tracked by pod key, so a pod that is deleted twice (graceful, then gone) lowers
the count once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from kubelite.clock import Clock

EXPECTATIONS_TIMEOUT = 300.0  # ExpectationsTimeout


@dataclass
class _Expectee:
    add: int
    delete: int
    at: float
    deleting: set[str] = field(default_factory=set)  # pod keys whose deletion is awaited

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class Expectations:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._by_key: dict[Hashable, _Expectee] = {}

    def satisfied(self, key: Hashable) -> bool:
        """SatisfiedExpectations: nothing pending, never recorded, or expired."""
        exp = self._by_key.get(key)
        if exp is None:
            return True
        return exp.fulfilled() or self.clock.monotonic() - exp.at > EXPECTATIONS_TIMEOUT

    def expect(self, key: Hashable, adds: int, pod_keys: Iterable[str] = ()) -> None:
        """SetExpectations: `adds` creations and the deletion of each pod in `pod_keys` (as the UID-tracking
        expectations, by key)."""
        keys = set(pod_keys)
        self._by_key[key] = _Expectee(adds, len(keys), self.clock.monotonic(), keys)

    def expect_creations(self, key: Hashable, adds: int) -> None:
        """ExpectCreations (SetExpectations with add=adds, del=0)."""
        self.expect(key, adds)

    def expect_deletions(self, key: Hashable, pod_keys: Iterable[str]) -> None:
        """UIDTrackingControllerExpectations.ExpectDeletions."""
        self.expect(key, 0, pod_keys)

    def creation_observed(self, key: Hashable) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.add -= 1

    def deletion_observed(self, key: Hashable, pod_key: str) -> None:
        """Lowers the deletion count once per awaited pod key."""
        exp = self._by_key.get(key)
        if exp is not None and pod_key in exp.deleting:
            exp.deleting.discard(pod_key)
            exp.delete -= 1

    def delete(self, key: Hashable) -> None:
        self._by_key.pop(key, None)
