"""The status manager: the only writer of pod status (kubelet's pkg/kubelet/status/status_manager.go).

Pod workers never call the API. They hand the status they computed to `set_status`, which
caches it with a per-pod version that only grows and wakes the sender; `set_status` cannot
fail and never blocks, so a lost API server can never reach a pod worker (and so never a
container). The sender writes each pod's newest status through the status subresource, with
the pod's uid as a precondition (a pod recreated under the same name is never written), and a
write counts as done only when the server acknowledged it: a failed write is retried with the
client's back-off helper (1 s doubling to 10 s; each attempt sends the newest status), and a
status older than the one acknowledged is never sent.

A write sends the two-way strategic merge patch from the status the API is known to hold to the new one
(kubelet's PatchPodStatus; kubelite/agent/status_patch.py), so a key the new status no longer has — a
condition's reason once the pod is ready — is deleted, not left stale. The status known to be held is the
last one acknowledged; before the first write, after a write whose outcome is unknown (it failed) and when a
resync found the object showing something else, it is the agent's own keys of the API object as the
informer has it (kubelet reads the pod from the server there): keys and conditions the agent never writes
(a scheduler's nominatedNodeName, a DisruptionTarget condition) are not the agent's to delete.

A pod that must go (terminal, deletion requested) is deleted with grace 0 only after its
final status was acknowledged (kubelet's `canBeDeleted`), and that delete is retried the same way.
Every RESYNC_INTERVAL the cached statuses are compared with the API objects the agent sees;
one that does not show what was acknowledged (the server lost it, someone overwrote it) is sent again.

Cost (the simulator runs thousands of agents in one process, issue 14): a node keeps an entry for every
pod object bound to it, finished ones included, until the object is gone. The sender looks only at the
entries made due since it last looked (`_due`), not at all of them on every wake, and the resync looks
only at the entries not known to match (`_unchecked`): an entry leaves that set when a resync finds the
API object showing its status, and comes back when its status changes (`set_status`) or its API object
does (`object_changed`, from the agent's pod informer handlers: informer objects are replaced, never
modified, and every replacement with new content reaches the handlers). So a running pod whose status and
object stay as they are costs nothing every 10 s, where walking every entry had cost each node a lookup
per pod it holds, finished ones included (BENCHMARKS.md, Running pod cost). And a sender with nothing to
resync (no unchecked entry) and nothing to retry waits on its wake alone — no wake-up, no bounded wait, no
timer at all: its resyncs are on a fixed grid, every 10 s from the sender's start (kubelet's syncTicker),
so the instant at which an entry unchecked meanwhile (`object_changed`) is compared is the grid's next,
computed then, and one timer wakes the sender for it (BENCHMARKS.md, Idle agent, second and third passes:
a timer per idle node every 10 s that only rescheduled itself had been ≈ 2 % of an idle simulation).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubelite.agent.loops import timed
from kubelite.agent.status_patch import two_way_patch
from kubelite.api.errors import ApiError
from kubelite.client import retry
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.interface import Client
from kubelite.client.retry import Backoff
from kubelite.clock import Cancellable, Clock, bounded, timer

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
RETRY = Backoff(duration=1.0, factor=2.0, cap=10.0)  # until acknowledged (or the pod is gone)
BUG_RETRY = 10.0  # an unexpected error (not the API's): logged, tried again after this long
RESYNC_INTERVAL = 10.0  # kubelet's status manager syncPeriod
BOUNDED_WAKE_TURNS = 2  # loop turns from a wake to the sender in a bounded wait, kept by the idle one (`_idle`)
GONE = (404, 409)  # the pod object is gone, or the name now holds another pod (uid precondition)
# the status keys the agent writes (StatusBuilder.build): only these are deleted when the new status lacks them
OWN_KEYS = frozenset({"phase", "hostIP", "hostIPs", "podIP", "podIPs", "startTime", "conditions",
                      "containerStatuses", "initContainerStatuses", "reason", "message"})


@dataclass
class _PodStatus:
    namespace: str
    name: str
    uid: str
    status: Obj | None = None
    version: int = 0  # bumped by every new status; only grows
    acked: int = 0  # the newest version the server acknowledged
    delete: bool = False  # delete the object (grace 0) once the status is acknowledged
    deleted: bool = False
    retry_at: float = 0.0  # only after an unexpected error
    seq: int = 0  # creation order: due entries are sent in this order, whatever order they became due in
    held: Obj | None = None  # the status the API is known to hold (the last acknowledged); None: ask `lookup`

    @property
    def due(self) -> bool:
        return self.version > self.acked or (self.delete and not self.deleted)


def summary(status: Obj, conditions: Iterable[str] = ()) -> tuple[Any, ...]:
    """What must match between the cached and the API status (fields the server may add are left out),
    including the status of each condition type in `conditions` — those the agent sets, as kubelet's
    isPodStatusByKubeletEqual compares its own: the node lifecycle controller sets Ready=False on the pods
    of a node it lost (MarkPodsNotReady), and the agent, back, must put its own word back (in a chaos
    run the pods stayed not Ready for good after every node had been cut off, seed 3)."""
    containers = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    shown = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    # The addresses and container IDs too: Services' endpoints follow podIP, and a status overwritten through
    # pods/status (or by an impostor agent) stayed wrong until the agent restarted.
    return (status.get("phase"), status.get("hostIP"), status.get("podIP"),
            tuple(ip.get("ip") for ip in status.get("podIPs") or []),
            tuple((c.get("name"), c.get("restartCount"), tuple(c.get("state") or {}), c.get("containerID"))
                  for c in containers), tuple(shown.get(kind) for kind in conditions))


class StatusManager:
    def __init__(self, client: Client, clock: Clock, lookup: Callable[[str, str], Obj | None] = lambda ns, n: None,
                 ) -> None:
        self.client = client
        self.clock = clock
        self.lookup = lookup  # the API object as the agent's informer has it (for the periodic resync)
        self.pods: dict[str, _PodStatus] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._due: set[str] = set()  # uids of entries made due since the sender last found them not due
        # uids of entries the next resync compares: all but those found matching since their status or API
        # object last changed
        self._unchecked: set[str] = set()
        self._created = 0
        self._wake = asyncio.Event()
        self._origin = 0.0  # when the sender started: it resyncs at origin + k·RESYNC_INTERVAL (`_instant_after`)
        self._resync_at = 0.0  # the sender's next resync instant (set when it starts; while idle, maybe passed)
        self._idling = False  # the sender waits on its wake alone (`_idle`)
        self._resync_timer: Cancellable | None = None  # while idle: wakes the sender at the instant to resync

    # --- inputs (never block, never fail) ---------------------------------------------------------

    def _entry(self, pod: Obj) -> _PodStatus:
        meta = pod["metadata"]
        entry = self.pods.get(meta["uid"])
        if entry is None:
            self._created += 1
            entry = self.pods[meta["uid"]] = _PodStatus(meta["namespace"], meta["name"], meta["uid"],
                                                        seq=self._created)
        return entry

    def set_status(self, pod: Obj, status: Obj) -> None:
        """Cache `status` as the pod's newest; it is written as soon as possible (unchanged: nothing to do)."""
        entry = self._entry(pod)
        if entry.status == status:
            return
        entry.status, entry.version = status, entry.version + 1
        self._unchecked.add(entry.uid)
        self._due_now(entry)

    def object_changed(self, uid: str) -> None:
        """The pod's API object (what `lookup` answers) was added or replaced: the next resync compares it."""
        if uid in self.pods:
            self._unchecked.add(uid)
            if self._idling and self._resync_timer is None and not self._wake.is_set():
                self._resync_when_idle()

    def delete_when_synced(self, pod: Obj) -> None:
        """Delete the pod object (grace 0, uid precondition) once its newest status is acknowledged."""
        entry = self._entry(pod)
        if not entry.delete:
            entry.delete = True
            self._due_now(entry)

    def synced(self, uid: str) -> bool:
        entry = self.pods.get(uid)
        return entry is None or not entry.due

    def forget(self, uid: str) -> None:
        """The pod object is gone: nothing more to write for it."""
        self.pods.pop(uid, None)
        self._due.discard(uid)
        self._unchecked.discard(uid)
        task = self._inflight.pop(uid, None)
        if task is not None:
            task.cancel()

    def _due_now(self, entry: _PodStatus) -> None:
        entry.retry_at = 0.0
        self._due.add(entry.uid)
        self._wake.set()

    # --- the sender --------------------------------------------------------------------------------

    async def run(self) -> None:
        self._origin = self.clock.monotonic()
        self._resync_at = self._instant_after(self._origin)
        while True:
            self._wake.clear()
            now = self.clock.monotonic()
            if now >= self._resync_at:
                self.resync()
                self._resync_at = self._instant_after(now)
            waits = self.send_due(now)
            if waits or self._unchecked:
                await bounded(self.clock, self._wake.wait(), min([self._resync_at, *waits]) - now)
            else:
                await self._idle()

    def _instant_after(self, now: float) -> float:
        """The first resync instant after `now`: origin + k·RESYNC_INTERVAL, a fixed grid (kubelet's syncTicker).
        Each instant is computed from the origin, never by adding to the last, so it is the same float however
        many instants passed unseen (`_idle`): a repeated sum would drift by its roundings."""
        k = max(1, math.floor((now - self._origin) / RESYNC_INTERVAL))  # the division may round either way:
        while self._origin + k * RESYNC_INTERVAL <= now:  # the first k past `now`, checked on the sums themselves
            k += 1
        while k > 1 and self._origin + (k - 1) * RESYNC_INTERVAL > now:
            k -= 1
        return self._origin + k * RESYNC_INTERVAL

    async def _idle(self) -> None:
        """Wait for the wake alone: while no entry is unchecked a resync has nothing to compare, so the resync
        instants pass unseen, with no timer — `_resync_at` is brought up to date when the wait ends, or when an
        entry is unchecked meanwhile (`_resync_when_idle`).

        Woken, the sender goes on two loop turns later, as it did from the bounded wait (its waiter task
        finishes, then its done-callback resumes the sender): the work of one instant keeps its order — which
        write goes first — so a simulation's event log stays as it was."""
        self._idling = True
        try:
            await self._wake.wait()
        finally:
            self._idling = False
            resync_timer, self._resync_timer = self._resync_timer, None
            if resync_timer is not None:  # `_resync_at` is the instant it was set for: due now, or still to come
                resync_timer.cancel()
            else:
                self._pass_idle_instants()
        for _ in range(BOUNDED_WAKE_TURNS):
            await self.clock.sleep(0)

    def _pass_idle_instants(self) -> None:
        """The resync instants that passed while the sender was idle with nothing to compare are gone: the next
        one is the grid's first after now (an instant that is now has passed too, as if its tick came first)."""
        now = self.clock.monotonic()
        if self._resync_at <= now:
            self._resync_at = self._instant_after(now)

    def _resync_when_idle(self) -> None:
        """An entry was unchecked while the sender is idle: wake it at the next resync instant to compare it."""
        self._pass_idle_instants()
        self._resync_timer = timer(self.clock, self._resync_at - self.clock.monotonic(), self._idle_instant)

    def _idle_instant(self) -> None:
        """The resync instant an entry was unchecked for: the sender wakes to compare it now (the timer's handle
        stays, telling `_idle` this instant is due) — unless every unchecked entry was forgotten meanwhile: then
        it passes as any idle instant, with no wake-up."""
        if self._unchecked:
            self._wake.set()
        else:
            self._resync_timer = None

    def send_due(self, now: float) -> list[float]:
        """Start a write for each due entry not being written; returns when the others wait to be retried."""
        waits = []
        for entry in sorted((self.pods[uid] for uid in self._due), key=lambda e: e.seq):
            if not entry.due:
                self._due.discard(entry.uid)
            elif entry.uid in self._inflight:
                continue
            elif entry.retry_at <= now:
                task = asyncio.ensure_future(self._sync(entry))
                self._inflight[entry.uid] = task
                task.add_done_callback(functools.partial(self._done, entry.uid))
            else:
                waits.append(entry.retry_at)
        return waits

    def _done(self, uid: str, _: asyncio.Task[None]) -> None:
        self._inflight.pop(uid, None)
        self._wake.set()

    def resync(self) -> None:
        """Send again every acknowledged status the API object does not show (kubelet's needsReconcile). Entries
        found matching since their status and API object last changed are not compared again (module doc)."""
        for entry in sorted((self.pods[uid] for uid in self._unchecked), key=lambda e: e.seq):  # a fixed order
            if entry.deleted:
                self._unchecked.discard(entry.uid)  # nothing is ever written for it again
                continue
            if entry.due or entry.status is None:
                continue
            pod = self.lookup(entry.namespace, entry.name)
            if pod is None or pod["metadata"].get("uid") != entry.uid:
                continue
            own = [c.get("type") for c in entry.status.get("conditions") or []]
            if summary(pod.get("status") or {}, own) == summary(entry.status, own):
                self._unchecked.discard(entry.uid)
                continue
            log.info("pod %s/%s: the API does not show the acknowledged status; sending it again",
                     entry.namespace, entry.name)
            entry.acked, entry.held = 0, None
            self._due.add(entry.uid)

    async def _sync(self, entry: _PodStatus) -> None:
        """Write the newest status, then (if asked) delete the object; retried until the server acknowledges."""
        try:
            await retry.on_error(lambda: self._write(entry), clock=self.clock, backoff=RETRY,
                                 retriable=lambda exc: self._retriable(entry, exc))
        except ApiError as exc:
            if exc.code not in GONE:
                raise
            entry.acked, entry.deleted = entry.version, True  # the object is gone: nothing left to write
        except Exception:
            log.exception("pod %s/%s: status sync failed; retrying in %.0f s", entry.namespace, entry.name,
                          BUG_RETRY)
            entry.retry_at = self.clock.monotonic() + BUG_RETRY

    async def _write(self, entry: _PodStatus) -> None:
        version, status = entry.version, entry.status
        if version > entry.acked and status is not None:
            held = self._held(entry, status)
            if "conditions" in held and "conditions" not in status:
                # a status without conditions (an admission refusal's) drops the agent's own one by one, never the
                # list: `conditions: null` would delete the other components' (PodScheduled, DisruptionTarget) too
                status = {**status, "conditions": []}
            patch = two_way_patch(held, status)
            entry.held = None  # until acknowledged, the API may hold either
            if patch:  # an empty diff: the API holds it already, nothing is sent (kubelet's PatchPodStatus)
                await timed(self.clock, self.client.patch(
                    resource_path("pods", entry.namespace, entry.name, "status"),
                    {"metadata": {"uid": entry.uid}, "status": patch}, STRATEGIC_PATCH))
            entry.acked, entry.held = max(entry.acked, version), status
        if entry.delete and not entry.deleted and entry.acked >= entry.version:
            await timed(self.clock, self.client.delete(resource_path("pods", entry.namespace, entry.name),
                                                       {"gracePeriodSeconds": 0, "preconditions": {"uid": entry.uid}}))
            entry.deleted = True

    def _held(self, entry: _PodStatus, status: Obj) -> Obj:
        """The status the patch is computed from: the last acknowledged, else the agent's own part of the API
        object's (its conditions of the types `status` has), else nothing (the whole status is sent).

        Partial against kubelet, which diffs against a fresh read of the pod: an agent-owned value another writer
        changed behind the agent and that the resync's `summary()` does not compare (a condition's reason or
        message, podIP) is not put back; and after a write whose outcome is unknown the informer's view, the base
        then, may be older than what the server holds, so a key added by the lost write is not nulled."""
        if entry.held is not None:
            return entry.held
        pod = self.lookup(entry.namespace, entry.name)
        if pod is None or pod["metadata"].get("uid") != entry.uid:
            return {}
        shown = {k: v for k, v in (pod.get("status") or {}).items() if k in OWN_KEYS}
        if isinstance(shown.get("conditions"), list):
            own = {c.get("type") for c in status.get("conditions") or []}
            shown["conditions"] = [c for c in shown["conditions"] if isinstance(c, dict) and c.get("type") in own]
            if not shown["conditions"]:
                del shown["conditions"]
        return shown

    @staticmethod
    def _retriable(entry: _PodStatus, exc: ApiError) -> bool:
        if exc.code in GONE:
            return False
        log.warning("pod %s/%s: status write failed (%s); retrying", entry.namespace, entry.name, exc)
        return True

    async def close(self) -> None:
        for task in list(self._inflight.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
