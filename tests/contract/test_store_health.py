"""`Store.health`, the health checks' probe, on every backend of the contract (real SQLite files, real etcd,
encryption at rest over both): a store that answers passes it, a closed one does not (etcd stopped under a
running server: tests/api/test_healthz.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.store.interface import StoreError
from tests.contract.test_store_contract import BACKENDS


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_health_passes_on_a_store_that_answers(backend: str, tmp_path: Path) -> None:
    store = await BACKENDS[backend](tmp_path)
    try:
        await store.health(2.0)
        await store.create("/r/pods/a", b"1")
        await store.health(2.0)
    finally:
        await store.close()


@pytest.mark.parametrize("backend", ["sqlite", "sqlite+aesgcm", "etcd", "etcd+aesgcm"])
async def test_health_fails_on_a_closed_store(backend: str, tmp_path: Path) -> None:
    store = await BACKENDS[backend](tmp_path)
    await store.close()
    with pytest.raises(StoreError):
        await store.health(0.5)
