"""The scheduler's view of claims, volumes and classes, with the bindings it has assumed but not yet written.

Upstream's volumebinding keeps "assume caches" over the PV and PVC informers: Reserve records the
volume it picked for a claim (or the node it picked for provisioning) so the next pod's cycle does
not pick the same volume, and PreBind writes them through the API. Here the informers' stores are
read through, and the assumed versions shadow them until PreBind has written them (or Unreserve
dropped them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelite.api.volumes import storage_class

Obj = dict[str, Any]
Key = tuple[str, str]


class VolumeCache:
    def __init__(self, claims: Mapping[Key, Obj], volumes: Mapping[Key, Obj], classes: Mapping[Key, Obj]) -> None:
        self._claims = claims
        self._volumes = volumes
        self._classes = classes
        self.assumed_volumes: dict[str, Obj] = {}
        self.assumed_claims: dict[Key, Obj] = {}

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self.assumed_claims.get((namespace, name)) or self._claims.get((namespace, name))

    def stored_claim(self, namespace: str, name: str) -> Obj | None:
        """The claim as the informer last saw it, without this scheduler's assumptions."""
        return self._claims.get((namespace, name))

    def volume(self, name: str) -> Obj | None:
        return self.assumed_volumes.get(name) or self._volumes.get(("", name))

    def volumes(self) -> list[Obj]:
        return [self.assumed_volumes.get(k[1], pv) for k, pv in self._volumes.items()]

    def storage_class(self, name: str) -> Obj | None:
        return self._classes.get(("", name)) if name else None

    def delay_binding(self, claim: Obj) -> bool:
        """IsDelayBindingMode: the claim's class binds when the first consumer is scheduled."""
        sc = self.storage_class(storage_class(claim))
        return sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"
