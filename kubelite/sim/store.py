"""The simulation's store: the SQLite store's own SQL, committed inline on the loop.

`SQLiteStore` commits on a writer thread in groups whose size depends on the thread's timing, and
acknowledges each group in one loop callback — so the order in which components see their writes
would depend on the machine. Here every write is committed at once on the loop (one transaction
each, through the same `_commit`), in a database file under a temporary directory, without fsync
(a simulation need not survive power loss). Same data model, same watch events, deterministic order.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from kubelite.store.sqlite import SQLiteStore, _connect, _Op


class InlineSQLiteStore(SQLiteStore):
    """`Store` for one simulation; `close()` removes its temporary directory."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="kubelite-sim-")
        path = Path(self._tmp.name) / "state.db"
        super().__init__(path, asyncio.get_running_loop())
        self._ops.put(None)  # the group-commit thread has nothing to do here: let it end now
        self._thread.join()
        self._conn = _connect(path)
        self._conn.execute("PRAGMA synchronous=OFF")

    async def _submit(self, op: _Op) -> Any:
        if self._closed:
            raise RuntimeError("store is closed")
        op.future = self._loop.create_future()
        self._commit(self._conn, [op])  # acknowledges through call_soon: in submission order
        return await op.future

    async def close(self) -> None:
        await super().close()
        self._conn.close()
        self._tmp.cleanup()
