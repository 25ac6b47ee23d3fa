"""The stored form is kept at its own size: orjson (3.13) returns each result in a buffer of at least 4 KiB, so
the store, its change log and the watch cache — which keep every encoded object — held ≈ 4 KiB per revision
however small the object (a Lease, an Event): found by the memory growth of the 24-hour simulation."""

from __future__ import annotations

import orjson

from kubelite.apiserver.nesting import dumps_kept
from kubelite.apiserver.rest import encode

COUNT = 20_000


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_kept_encodings_cost_their_size_not_a_buffer_each() -> None:
    lease = {"metadata": {"name": "node-1", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "node-1"}}
    before = resident_mib()
    kept = [encode({**lease, "metadata": {**lease["metadata"], "uid": str(i)}}) for i in range(COUNT)]
    grown = resident_mib() - before
    # ≈ 110 bytes each: 2 MiB and the list; a 4 KiB buffer each would be 78 MiB
    assert grown < 16, f"{COUNT} stored Leases of {len(kept[0])} bytes grew the process by {grown:.0f} MiB"
    assert orjson.loads(kept[0]) == {**lease, "metadata": {**lease["metadata"], "uid": "0"}}


def test_dumps_kept_is_dumps() -> None:
    doc = {"a": [1, 2.5, None, True], "b": {"c": "é"}, "big": 2**70}  # beyond 64 bits: the stdlib's encoder
    assert orjson.loads(dumps_kept(doc)) == doc
