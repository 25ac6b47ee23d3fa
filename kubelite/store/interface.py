"""The store seam: an etcd-shaped key-value store with one global revision.

Every backend (SQLite now, etcd later) passes `tests/contract/test_store_contract.py`.
An object's resourceVersion is the revision of its last write (etcd's mod_revision).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class StoreError(Exception):
    pass


class Unavailable(StoreError):
    """The store did not answer (etcd unreachable, or no quorum): an operational condition, logged as one line,
    not a bug's traceback."""


class KeyExists(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFound(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionMismatch(StoreError):
    """A compare-and-swap lost: the key's mod revision is not the expected one."""

    def __init__(self, key: str, current: KeyValue | None) -> None:
        super().__init__(f"revision mismatch on {key}")
        self.key = key
        self.current = current


class Compacted(StoreError):
    """The requested revision is older than the oldest one kept (HTTP 410)."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted (compacted revision {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevision(StoreError):
    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"required revision {requested} is a future revision (current {current})")
        self.requested = requested
        self.current = current


# KeyValue and Event are NamedTuples, not frozen dataclasses: every write makes one of each (and the SQLite and etcd
# stores more), and a frozen dataclass's __init__ sets each field through object.__setattr__ (0.9 µs against 0.3).
class KeyValue(NamedTuple):
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


class EventType(enum.StrEnum):
    PUT = "PUT"
    DELETE = "DELETE"
    # A bookmark (etcd's progress notification): every change up to `revision` has been delivered. Its kv is
    # empty; only a watch asked with progress=True yields them.
    PROGRESS = "PROGRESS"


class Event(NamedTuple):
    """One change. For DELETE, `kv.value` is the last value and `kv.mod_revision` the delete's revision."""

    type: EventType
    kv: KeyValue
    prev: KeyValue | None
    revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[KeyValue]
    revision: int


def prefix_end(prefix: str) -> str:
    """The first key after every key with this prefix (for key-range scans)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else "\U0010ffff"


class Store(Protocol):
    async def get(self, key: str) -> KeyValue | None: ...

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        """Every key under `prefix` as of `revision` (0 = latest)."""
        ...

    async def create(self, key: str, value: bytes) -> KeyValue: ...

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        """Compare-and-swap: raises RevisionMismatch unless the key's mod revision matches."""
        ...

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        """Delete (guarded when `expected_mod_revision` is set); returns the tombstone."""
        ...

    def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        """Events with revision > `from_revision`, history first, then live, in order; with `progress`, also
        PROGRESS events when the store knows nothing before a newer revision is left to send. Raises Compacted
        when `from_revision` (or, for a watch that resumes after a broken stream, its resume point) is gone."""
        ...

    async def compact(self, revision: int) -> None: ...

    async def health(self, timeout: float) -> None:
        """Return when the store answers a read within `timeout` seconds, else raise Unavailable (the health
        checks' probe: cheap, one read, and never retried)."""
        ...

    @property
    def revision(self) -> int: ...

    @property
    def compacted_revision(self) -> int: ...

    async def close(self) -> None: ...


class WrappedStore:
    """A Store that passes every call to `inner`: the base of a store that changes some of them (encryption at
    rest seals and opens values; tests inject faults) and must pass the rest on unchanged."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    async def get(self, key: str) -> KeyValue | None:
        return await self.inner.get(key)

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        return await self.inner.list(prefix, revision)

    async def create(self, key: str, value: bytes) -> KeyValue:
        return await self.inner.create(key, value)

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        return await self.inner.update(key, value, expected_mod_revision)

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        return await self.inner.delete(key, expected_mod_revision)

    def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        return self.inner.watch(prefix, from_revision, progress)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def health(self, timeout: float) -> None:
        await self.inner.health(timeout)

    @property
    def revision(self) -> int:
        return self.inner.revision

    @property
    def compacted_revision(self) -> int:
        return self.inner.compacted_revision

    async def close(self) -> None:
        await self.inner.close()
