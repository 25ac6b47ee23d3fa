"""A patch that loses its compare-and-swap to a concurrent write is applied again to the object that won, from its
document as sent (GuaranteedUpdate's retry). A strategic merge's result holds the document's values and the update
then changes them (pruning, null dropping), so a retry decodes the document again (handlers.py): here the retried
attempts must give what one attempt on the winner gives, pruned and with nulls dropped. (The changes an attempt makes
to the values it took are the same again on a retry, so the strategic case also checks that the retry was given a
document of its own, equal to the body as sent.)

The store is real (the simulator's MemoryStore); a write by another client is slipped in between the API server's
read of the object and its write, once, by a store that makes that write itself before the patch's first update.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubelite.apiserver import patch
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.store.interface import KeyValue
from kubelite.store.memory import MemoryStore
from kubelite.testing.builders import make_pod
from tests.conftest import running

PODS = "/api/v1/namespaces/default/pods"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class RacedStore(MemoryStore):
    """Before the first update of `key` after `armed`, another writer's update of it (labels race=won)."""

    key = ""
    armed = False

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        if self.armed and key == self.key:
            self.armed = False
            current = self._kv[key]
            other = orjson.loads(current.value)
            other["metadata"].setdefault("labels", {})["race"] = "won"
            await super().update(key, orjson.dumps(other), current.mod_revision)
        return await super().update(key, value, expected_mod_revision)


# (content type, patch, what the stored pod's status must hold after)
CASES = [
    pytest.param(STRATEGIC, {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None,
                                                        "bogus": 1}], "phase": "Running"}},
                 {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
                 id="strategic merge: nulls dropped and fields pruned from the document's values, twice"),
    pytest.param(MERGE, {"status": {"phase": "Running", "message": None, "hostIP": "10.0.0.1"}},
                 {"phase": "Running", "hostIP": "10.0.0.1"}, id="merge patch"),
    pytest.param(JSON_PATCH, [{"op": "add", "path": "/status/phase", "value": "Running"}], {"phase": "Running"},
                 id="JSON patch"),
]


@pytest.mark.parametrize(("ctype", "body", "status"), CASES)
async def test_a_patch_retried_after_a_conflict_applies_its_document_as_sent(ctype: str, body: Any,
                                                                            status: dict[str, Any],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    documents: list[Any] = []  # what each strategic merge attempt was given

    def recording(cur: Any, doc: Any, model: str) -> Any:
        documents.append(doc)
        return merging(cur, doc, model)

    merging = patch.strategic_merge_patch
    monkeypatch.setattr(patch, "strategic_merge_patch", recording)
    store = RacedStore()
    async with running(store) as server:
        client = InProcessClient(server)
        await client.create(PODS, make_pod("p").obj())
        store.key, store.armed = "/registry/core/pods/default/p", True
        out = await client.patch(f"{PODS}/p/status", body, ctype)
        assert not store.armed  # the race happened
        stored = await client.get(f"{PODS}/p")
        assert stored["metadata"]["labels"]["race"] == "won"  # applied to the object that won
        for answer in (stored, out):
            assert {k: v for k, v in answer["status"].items() if k != "qosClass"} == status
    if ctype == STRATEGIC:  # the retry had a document of its own, decoded again, not the one the first changed
        assert len(documents) == 2 and documents[0] is not documents[1] and documents[1] == body
