"""`Store` over etcd v3, through grpcio's asyncio stubs (the generated ones that `aetcd` ships).

Why gRPC and not etcd's JSON gateway or `aetcd`'s client: measured in BENCHMARKS.md ("etcd client"):
gRPC multiplexes every call over one HTTP/2 connection per member and did ~2.3 times the gateway's puts/s
at 20 callers; `aetcd` is as fast as the bare stubs but speaks to one host, so no member failover.

The mapping is kube-apiserver's (k8s.io/apiserver/pkg/storage/etcd3/store.go):
- resourceVersion = etcd's mod_revision; a list's revision = the response header's revision;
- create = txn(create_revision(key) == 0 → put); update/delete = txn(mod_revision(key) == expected
  → put/delete, else → range key, to tell "missing" from "changed" and to return the current value);
- lists are key ranges read in pages of `PAGE` (`limit`, continuing after the last key) at one revision;
- watches ask for prev_kv and progress notifications; a broken stream (a member died) is resumed on
  another member from the last revision delivered or acknowledged by a progress notification; a watch
  asked with progress=True (the watch cache's) gets those notifications as PROGRESS events (bookmarks);
  one whose resume point was compacted meanwhile raises Compacted (its owner relists);
- compaction is etcd's Compact (logical; etcd defragments nothing by itself: see the README).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from aetcd.rpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

from kubelite.clock import Clock, RealClock
from kubelite.store.etcd.endpoints import EtcdConfig
from kubelite.store.interface import (
    Compacted,
    Event,
    EventType,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RevisionMismatch,
    StoreError,
    Unavailable,
    prefix_end,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE = 1000
# Per attempt, waiting for a reachable member included. Short because a write forwarded to a leader
# that then died is only failed by etcd after its request timeout (~7s): retrying sooner reaches the
# new leader (an election takes ~1s) and the retry recognises the write if the first one did land.
CALL_TIMEOUT = 2.0
RETRY_FOR = 30.0  # a write or read keeps retrying an unavailable cluster this long (an election takes ~1s)
RETRY_BACKOFF = (0.05, 1.0)
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
# Watches on a member cut off from its leader would wait forever; with this etcd cancels them instead.
_REQUIRE_LEADER = (("hasleader", "true"),)
_CMP_CREATE = rpc_pb2.Compare.CREATE
_CMP_MOD = rpc_pb2.Compare.MOD
_CMP_EQUAL = rpc_pb2.Compare.EQUAL
_CMP_GREATER = rpc_pb2.Compare.GREATER


def _kv(kv: Any) -> KeyValue:
    return KeyValue(kv.key.decode(), bytes(kv.value), int(kv.create_revision), int(kv.mod_revision))


def _compare(key: bytes, target: int, result: int, value: int) -> Any:
    field = "create_revision" if target == _CMP_CREATE else "mod_revision"
    return rpc_pb2.Compare(key=key, target=target, result=result, **{field: value})


class EtcdStore:
    """`Store` over an etcd cluster; create with `await EtcdStore.open(config)`."""

    def __init__(self, config: EtcdConfig, clock: Clock) -> None:
        self._channel = config.channel()
        self._kv = rpc_pb2_grpc.KVStub(self._channel)
        self._watch = rpc_pb2_grpc.WatchStub(self._channel)
        self._clock = clock
        self._revision = 0
        self._compacted = 0

    @classmethod
    async def open(cls, config: EtcdConfig, clock: Clock | None = None) -> EtcdStore:
        store = cls(config, clock or RealClock())
        try:
            await store._learn_revisions()
        except BaseException:
            await store.close()
            raise
        return store

    async def _learn_revisions(self) -> None:
        """The current revision (one range) and the compacted one (a watch from revision 1 is refused with it)."""
        resp = await self._unary(self._kv.Range, rpc_pb2.RangeRequest(key=b"\0", count_only=True))
        self._seen(resp.header.revision)
        call = self._watch.Watch(metadata=_REQUIRE_LEADER, timeout=CALL_TIMEOUT)
        try:
            await call.write(rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
                key=b"\0", start_revision=1)))
            first = await call.read()
            if first is not grpc.aio.EOF and first.compact_revision:
                self._compacted = int(first.compact_revision)
        except grpc.aio.AioRpcError as exc:
            raise Unavailable(f"etcd unavailable: {exc.details()}") from None
        finally:
            call.cancel()

    # --- properties ------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The newest revision this store has seen (its own writes, lists, and its watches' events)."""
        return self._revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    def _seen(self, revision: int) -> None:
        self._revision = max(self._revision, int(revision))

    # --- calls -----------------------------------------------------------------------------------

    async def _unary(self, method: Callable[..., Awaitable[T]], request: Any) -> T:
        """One call, retried while the cluster is unavailable (a member died, an election is on)."""
        deadline = self._clock.monotonic() + RETRY_FOR
        delay = RETRY_BACKOFF[0]
        while True:
            try:
                return await method(request, timeout=CALL_TIMEOUT, wait_for_ready=True)
            except grpc.aio.AioRpcError as exc:
                self._raise_known(exc)
                if exc.code() not in _RETRYABLE:
                    raise StoreError(f"etcd: {exc.code().name}: {exc.details()}") from None
                if self._clock.monotonic() + delay > deadline:
                    raise Unavailable(f"etcd unavailable: {exc.details()}") from None
                log.debug("etcd call failed (%s), retrying in %.2fs", exc.details(), delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, RETRY_BACKOFF[1])

    def _raise_known(self, exc: grpc.aio.AioRpcError) -> None:
        """etcd's revision errors as the store's (the requested revision is filled in by the caller)."""
        details = exc.details() or ""
        if "required revision has been compacted" in details:
            raise Compacted(0, self._compacted)
        if "required revision is a future revision" in details:
            raise FutureRevision(0, self._revision)

    async def _txn(self, key: bytes, compare: Any, success: Any, resolve: Callable[[Any], T]) -> T:
        """A compare-and-op txn; its failure branch reads the key so that the caller can tell why.

        A retried write whose first attempt did commit (the reply was lost with a member) fails its
        compare the second time; `resolve` sees the current value and recognises its own write.
        """
        req = rpc_pb2.TxnRequest(compare=[compare], success=[success],
                                 failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))])
        resp = await self._unary(self._kv.Txn, req)
        self._seen(resp.header.revision)
        return resolve(resp)

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        resp = await self._unary(self._kv.Range, rpc_pb2.RangeRequest(key=key.encode()))
        self._seen(resp.header.revision)
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        if revision and revision < self._compacted:
            raise Compacted(revision, self._compacted)
        start, end = prefix.encode(), prefix_end(prefix).encode()
        items: builtins.list[KeyValue] = []
        at = revision
        while True:
            req = rpc_pb2.RangeRequest(key=start, range_end=end, limit=PAGE, revision=at)
            try:
                resp = await self._unary(self._kv.Range, req)
            except Compacted as exc:
                raise Compacted(revision, exc.compacted) from None
            except FutureRevision as exc:
                raise FutureRevision(revision, exc.current) from None
            self._seen(resp.header.revision)
            at = at or int(resp.header.revision)  # later pages read the first page's revision
            items.extend(_kv(kv) for kv in resp.kvs)
            if not resp.more or not resp.kvs:
                return ListResult(items, at)
            start = resp.kvs[-1].key + b"\0"

    # --- writes ----------------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        k = key.encode()

        def resolve(resp: Any) -> KeyValue:
            if resp.succeeded:
                rev = int(resp.header.revision)
                return KeyValue(key, value, rev, rev)
            current = resp.responses[0].response_range.kvs
            if current and current[0].value == value and current[0].version == 1:
                return _kv(current[0])  # our own create, its reply lost on a retried call
            raise KeyExists(key)

        return await self._txn(k, _compare(k, _CMP_CREATE, _CMP_EQUAL, 0),
                               rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=k, value=value)), resolve)

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        k = key.encode()
        guard = (_compare(k, _CMP_MOD, _CMP_EQUAL, expected_mod_revision) if expected_mod_revision
                 else _compare(k, _CMP_CREATE, _CMP_GREATER, 0))

        def resolve(resp: Any) -> KeyValue:
            if resp.succeeded:
                prev = resp.responses[0].response_put.prev_kv
                return KeyValue(key, value, int(prev.create_revision), int(resp.header.revision))
            current = resp.responses[0].response_range.kvs
            if not current:
                raise KeyNotFound(key)
            kv = _kv(current[0])
            if kv.value == value and kv.mod_revision > expected_mod_revision:
                return kv  # our own update, its reply lost on a retried call
            raise RevisionMismatch(key, kv)

        return await self._txn(k, guard, rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
            key=k, value=value, prev_kv=True)), resolve)

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        k = key.encode()
        guard = (_compare(k, _CMP_MOD, _CMP_EQUAL, expected_mod_revision) if expected_mod_revision
                 else _compare(k, _CMP_CREATE, _CMP_GREATER, 0))

        def resolve(resp: Any) -> KeyValue:
            if resp.succeeded:
                deleted = resp.responses[0].response_delete_range.prev_kvs
                if not deleted:  # deleted between compare and delete cannot happen in one txn; be explicit
                    raise KeyNotFound(key)
                prev = _kv(deleted[0])
                return KeyValue(key, prev.value, prev.create_revision, int(resp.header.revision))
            current = resp.responses[0].response_range.kvs
            if not current:
                raise KeyNotFound(key)
            raise RevisionMismatch(key, _kv(current[0]))

        return await self._txn(k, guard, rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(
            key=k, prev_kv=True)), resolve)

    async def compact(self, revision: int) -> None:
        if revision > self._revision:
            raise FutureRevision(revision, self._revision)
        with contextlib.suppress(Compacted):  # another server (or an earlier attempt) compacted this far
            await self._unary(self._kv.Compact, rpc_pb2.CompactionRequest(revision=revision))
        self._compacted = max(self._compacted, revision)

    async def health(self, timeout: float) -> None:
        """One linearizable count of a tiny key range, not retried and not waiting for a connection: a member
        that is stopped, partitioned or without a leader fails it within `timeout` (upstream's probe is a get of
        "health" too). A linearizable read passes through the leader, so it also tells a lost quorum."""
        try:
            await self._kv.Range(rpc_pb2.RangeRequest(key=b"health", count_only=True), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise Unavailable(f"etcd: {exc.code().name}: {exc.details()}") from None
        except grpc.aio.UsageError as exc:  # the store was closed (the server is stopping)
            raise Unavailable(f"etcd: {exc}") from None

    # --- watch -----------------------------------------------------------------------------------

    async def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        if from_revision and from_revision < self._compacted:
            raise Compacted(from_revision, self._compacted)
        key, end = prefix.encode(), prefix_end(prefix).encode()
        last = from_revision or None  # None: from now (etcd picks the revision, the created reply says it)
        delay = RETRY_BACKOFF[0]
        while True:
            call = self._watch.Watch(metadata=_REQUIRE_LEADER)
            try:
                await call.write(rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
                    key=key, range_end=end, start_revision=last + 1 if last is not None else 0,
                    prev_kv=True, progress_notify=True)))
                async for resp in call:
                    if resp.compact_revision:
                        self._compacted = max(self._compacted, int(resp.compact_revision))
                        raise Compacted(last or 0, int(resp.compact_revision))
                    if resp.canceled:  # e.g. the member lost its leader: resume elsewhere
                        log.warning("etcd watch cancelled: %s; resuming", resp.cancel_reason)
                        break
                    if resp.created:
                        if last is None:
                            last = int(resp.header.revision)
                        continue
                    delay = RETRY_BACKOFF[0]
                    for ev in resp.events:
                        event = _event(ev)
                        last = event.revision
                        self._seen(last)
                        yield event
                    if not resp.events:  # a progress notification: nothing up to here is left unsent
                        revision = int(resp.header.revision)
                        if last is None or revision > last:
                            last = revision
                            if progress:
                                yield Event(EventType.PROGRESS, KeyValue("", b"", 0, revision), None, revision)
            except grpc.aio.AioRpcError as exc:  # the watch cache lives on this loop: never give up on etcd
                log.warning("etcd watch broken (%s: %s); resuming after revision %s", exc.code().name,
                            exc.details(), last)
            finally:
                call.cancel()
            await self._clock.sleep(delay)
            delay = min(delay * 2, RETRY_BACKOFF[1])

    # --- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._channel.close()


def _event(ev: Any) -> Event:
    kv = ev.kv
    prev = _kv(ev.prev_kv) if ev.HasField("prev_kv") else None
    rev = int(kv.mod_revision)
    if ev.type == kv_pb2.Event.DELETE:
        last = prev or KeyValue(kv.key.decode(), b"", 0, rev)
        return Event(EventType.DELETE, KeyValue(last.key, last.value, last.create_revision, rev), prev, rev)
    return Event(EventType.PUT, _kv(kv), prev, rev)
