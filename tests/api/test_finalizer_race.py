"""Removing a deleting object's last finalizer while another client writes it (the garbage collector's patch
racing a controller's status write): upstream's GuaranteedUpdate retries the lost compare-and-swap, so the object
goes, and the client never sees a 500 (the QA repro: `kubectl delete deploy od --cascade=orphan` right after
create logged "internal error serving PATCH" ending in RevisionMismatch).

The store is real (the simulator's MemoryStore); another writer's update is slipped in, once, between the API
server's read of the object and its conditional delete.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.store.interface import KeyValue
from kubelite.store.memory import MemoryStore
from tests.conftest import running

CMS = "/api/v1/namespaces/default/configmaps"
KEY = "/registry/core/configmaps/default/c"


class RacedDeleteStore(MemoryStore):
    """Before the first conditional delete of KEY after `armed`, another writer's update of it (labels race=won)."""

    armed = False

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        if self.armed and key == KEY:
            self.armed = False
            current = self._kv[key]
            other = orjson.loads(current.value)
            other["metadata"].setdefault("labels", {})["race"] = "won"
            await super().update(key, orjson.dumps(other), current.mod_revision)
        return await super().delete(key, expected_mod_revision)


async def _merge_patch(client: InProcessClient, cur: dict[str, Any]) -> Any:
    return await client.patch(f"{CMS}/c", {"metadata": {"finalizers": None}}, "application/merge-patch+json")


async def _json_patch(client: InProcessClient, cur: dict[str, Any]) -> Any:
    return await client.patch(f"{CMS}/c", [{"op": "remove", "path": "/metadata/finalizers"}],
                              "application/json-patch+json")


async def _update(client: InProcessClient, cur: dict[str, Any]) -> Any:
    del cur["metadata"]["finalizers"], cur["metadata"]["resourceVersion"]
    return await client.request("PUT", f"{CMS}/c", cur)


@pytest.mark.parametrize("remove", [
    pytest.param(_merge_patch, id="merge patch removing the last finalizer retries a lost race and deletes"),
    pytest.param(_json_patch, id="JSON patch removing the last finalizer retries a lost race and deletes"),
    pytest.param(_update, id="update removing the last finalizer retries a lost race and deletes"),
])
async def test_last_finalizer_removal_racing_a_write_deletes_the_object(remove: Any) -> None:
    store = RacedDeleteStore()
    async with running(store) as server:
        client = InProcessClient(server)
        await client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "c", "finalizers": ["example.com/hold"]}})
        await client.request("DELETE", f"{CMS}/c")
        cur = await client.get(f"{CMS}/c")
        assert cur["metadata"]["deletionTimestamp"]
        store.armed = True
        await remove(client, cur)
        assert not store.armed  # the race happened
        with pytest.raises(ApiError) as gone:
            await client.get(f"{CMS}/c")
        assert gone.value.code == 404
