"""The DaemonSet controller: one pod of each DaemonSet on every node that should run it (pkg/controller/daemon).

A sync (syncDaemonSet) reads the set, the nodes and the set's pods and ControllerRevisions from the shared
informers, then:
1. **History** (constructHistory): the ControllerRevision whose data is the set's template is the current
   one — made (`<set>-<hash>`, labelled `controller-revision-hash`) when missing, renumbered to be the
   newest when an older template comes back (`kubectl rollout undo`), duplicates removed. A name taken by
   another template bumps `status.collisionCount` and fails the sync, to be retried with a new hash.
2. **Manage** (daemonset_util.pods_should_be_on_node for each node): create the missing pods, each pinned to
   its node by node affinity and placed by the scheduler; delete pods on nodes that should not run them,
   extra pods, and finished pods (a failed one with a back-off per node and observed generation of 1 s
   doubling to 15 min, as upstream's failedPodsBackoff, so a node that rejects the pod is not hot-looped).
   The set's verdict on each node is computed once per sync (daemonset_util.verdicts) for all the steps.
3. **Update**: with a RollingUpdate strategy and nothing pending, replace old pods within maxUnavailable, or
   start new pods beside old ones within maxSurge; OnDelete replaces a pod only once someone deletes it.
4. **History clean-up** beyond revisionHistoryLimit (never a revision a live pod still carries), then the
   **status**, with observedGeneration, written through the status subresource.

Creations and deletions are counted in expectations, so a sync never acts twice on pods its informer has
not yet delivered. Pods are claimed like the ReplicaSet controller's (ownership.RefManager: matching orphans
adopted, owned pods that stopped matching released). Node changes wake the sets whose placement they change;
pod changes wake a set only when they touch what its sync reads (`_pod_facts`, labels, owner).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.api.selectors import LabelSelector, compile_label_selector
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import resource_path
from kubelite.client.informer import NAMESPACE_INDEX, OWNER_UID_INDEX, Handlers, Key, by_owner_uid, key_of
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.controllers import daemonset_util as du
from kubelite.controllers import podcontrol as pc
from kubelite.controllers import podutil
from kubelite.controllers.cronjob_utils import is_namespace_terminating
from kubelite.controllers.daemonset_history import History
from kubelite.controllers.expectations import Expectations
from kubelite.controllers.informers import SharedInformerHandle, shared_informer
from kubelite.controllers.ownership import ORPHAN_INDEX, RefManager, controller_of, orphans_by_namespace, recheck_owner
from kubelite.controllers.replicaset import (
    BURST_REPLICAS,
    SLOW_START_INITIAL_BATCH,
    pod_from_template,
    pod_key,
    slow_start_batch,
)
from kubelite.controllers.runner import Runner, run_synced

log = logging.getLogger("kubelite.controllers.daemonset")

Obj = dict[str, Any]
COMPONENT = "daemonset-controller"
KIND = "DaemonSet"
WORKERS = 2  # --concurrent-daemonset-syncs
BACKOFF_INITIAL, BACKOFF_MAX = 1.0, 900.0  # failedPodsBackoff: flowcontrol.NewBackOff(1s, 15min)
BACKOFF_GC_INTERVAL = 60.0  # BackoffGCInterval


class FailedPodsBackoff:
    """flowcontrol.Backoff per failedPodsBackoffKey (`<set uid>/<observedGeneration>/<node>`, so editing the set
    starts over): the delay doubles on each failed pod, from 1 s to 15 min, and starts over once a key has gone
    twice the maximum without one. `gc` drops such idle keys (upstream runs it every minute), `forget` a deleted
    set's."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._entries: dict[str, tuple[float, float]] = {}  # key → (delay, last update)

    def in_backoff(self, key: str) -> float:
        """IsInBackOffSinceUpdate: the time left, 0 when a failed pod may be deleted now."""
        delay, at = self._entries.get(key, (0.0, 0.0))
        return max(0.0, at + delay - self.clock.monotonic())

    def next(self, key: str) -> None:
        now = self.clock.monotonic()
        delay, at = self._entries.get(key, (0.0, 0.0))
        fresh = delay == 0.0 or now - at > 2 * BACKOFF_MAX
        self._entries[key] = (BACKOFF_INITIAL if fresh else min(2 * delay, BACKOFF_MAX), now)

    def gc(self) -> None:
        """Backoff.GC: keys idle for twice the maximum are as good as new; drop them."""
        now = self.clock.monotonic()
        self._entries = {k: e for k, e in self._entries.items() if now - e[1] <= 2 * BACKOFF_MAX}

    def forget(self, uid: str) -> None:
        """A deleted set's keys will never be asked for again (a re-created set has a new uid)."""
        self._entries = {k: e for k, e in self._entries.items() if not k.startswith(f"{uid}/")}

    def __len__(self) -> int:
        return len(self._entries)


def backoff_key(ds: Obj, node: str) -> str:
    """failedPodsBackoffKey: the set's uid, its observed generation and the node."""
    return f"{ds['metadata']['uid']}/{(ds.get('status') or {}).get('observedGeneration') or 0}/{node}"


def _pod_facts(pod: Obj) -> tuple[object, ...]:
    """What of a pod its set's sync reads beyond labels, owner and deletion: the phase (finished pods are
    replaced), readiness and since when (availability), the node it is bound to (bound pods are kept first).
    A pod update that changes none of these (a status heartbeat, a container's restart count) does not wake the
    set; upstream wakes it for every update, which at 5,000 nodes is a full sync per kubelet status write."""
    ready = podutil.ready_condition(pod) or {}
    return ((pod.get("status") or {}).get("phase"), ready.get("status"), ready.get("lastTransitionTime"),
            (pod.get("spec") or {}).get("nodeName"))


def _selector(ds: Obj) -> LabelSelector:
    return compile_label_selector((ds.get("spec") or {}).get("selector"))


def _with_kind(ds: Obj) -> Obj:
    return {**ds, "apiVersion": "apps/v1", "kind": KIND}


class DaemonSetController:
    def __init__(self, client: Client, clock: Clock, burst_replicas: int = BURST_REPLICAS,
                 workers: int = WORKERS) -> None:
        self.client = client
        self.clock = clock
        self.burst = burst_replicas
        self.expectations = Expectations(clock)
        self.backoff = FailedPodsBackoff(clock)
        self.events = EventSink(client, clock)
        self.runner: Runner[Key] = Runner("daemonset", self.sync, clock, workers)
        self.sets = shared_informer(client, clock, "/apis/apps/v1/daemonsets",
                                    Handlers(self._set_changed, self._set_updated, self._set_deleted))
        self.pods = shared_informer(client, clock, "/api/v1/pods",
                                    Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        self.nodes = shared_informer(client, clock, "/api/v1/nodes",
                                     Handlers(self._node_added, self._node_updated, self._node_added))
        self.revisions = shared_informer(client, clock, "/apis/apps/v1/controllerrevisions",
                                         Handlers(self._revision_added, self._revision_updated,
                                                  self._revision_deleted))
        for informer in (self.pods, self.revisions):
            informer.add_index(OWNER_UID_INDEX, by_owner_uid)
            informer.add_index(ORPHAN_INDEX, orphans_by_namespace)
        self.history = History(client)
        self.written: dict[Key, Obj] = {}  # each set as our last status write returned it

    async def run(self) -> None:
        await run_synced((self.sets, self.pods, self.nodes, self.revisions), (self.runner.run, self._gc_backoff),
                         alongside=(self.events.run,))

    async def _gc_backoff(self) -> None:
        """`wait.Until(failedPodsBackoff.GC, BackoffGCInterval)`: idle back-off entries go once a minute."""
        while True:
            await self.clock.sleep(BACKOFF_GC_INTERVAL)
            self.backoff.gc()

    # --- event handlers --------------------------------------------------------------------------

    def _set_changed(self, ds: Obj) -> None:
        self.runner.enqueue(key_of(ds))

    def _set_updated(self, old: Obj, new: Obj) -> None:
        """updateDaemonset: a new uid under the same name is a set deleted and re-created (the delete event may
        have been missed): the old one's expectations go first."""
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            self._set_deleted(old)
        self._set_changed(new)

    def _set_deleted(self, ds: Obj) -> None:
        self.expectations.delete(key_of(ds))
        self.written.pop(key_of(ds), None)
        self.backoff.forget(ds["metadata"].get("uid", ""))

    def _owner(self, obj: Obj) -> Obj | None:
        """resolveControllerRef: the cached set the object's controller reference names, if it has that uid."""
        ref = controller_of(obj)
        if ref is None or ref.get("kind") != KIND:
            return None
        ds = self.sets.get(obj["metadata"].get("namespace", ""), ref.get("name", ""))
        return ds if ds is not None and ds["metadata"].get("uid") == ref.get("uid") else None

    def _selecting(self, obj: Obj) -> list[Obj]:
        """getDaemonSetsForPod: the sets of the object's namespace whose selector matches it."""
        out = []
        for ds in self.sets.by_index(NAMESPACE_INDEX, obj["metadata"].get("namespace", "")):
            try:
                if _selector(ds).matches(obj["metadata"].get("labels")):
                    out.append(ds)
            except ApiError:
                continue
        return out

    def _wake_owner_or_selecting(self, obj: Obj) -> None:
        """Wake the object's set; an orphan wakes the sets that may adopt it."""
        ds = self._owner(obj)
        if ds is not None:
            self.runner.enqueue(key_of(ds))
        elif controller_of(obj) is None and not obj["metadata"].get("deletionTimestamp"):
            for candidate in self._selecting(obj):
                self.runner.enqueue(key_of(candidate))

    def _wake_on_update(self, old: Obj, new: Obj, owned_changed: bool) -> Obj | None:
        """updatePod / updateHistory: a changed controller reference wakes the former owner; the current owner
        is woken when `owned_changed` or its reference or labels changed, an orphan's would-be adopters only on
        those. Returns the current owner."""
        ref_changed = controller_of(old) != controller_of(new)
        labels_changed = old["metadata"].get("labels") != new["metadata"].get("labels")
        if ref_changed and controller_of(old) is not None:
            former = self._owner(old)
            if former is not None:
                self.runner.enqueue(key_of(former))
        ds = self._owner(new)
        if ds is not None:
            if owned_changed or ref_changed or labels_changed:
                self.runner.enqueue(key_of(ds))
        elif controller_of(new) is None and (labels_changed or ref_changed):
            self._wake_owner_or_selecting(new)  # an orphan's other changes cannot make a set adopt it
        return ds

    def _pod_added(self, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)  # seen for the first time while already terminating (after a relist)
            return
        ds = self._owner(pod)
        if ds is not None:
            self.expectations.creation_observed(key_of(ds))
        self._wake_owner_or_selecting(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if new["metadata"].get("deletionTimestamp"):
            self._pod_deleted(new)  # a terminating pod is as good as gone: its replacement may be made now
            return
        ds = self._wake_on_update(old, new, _pod_facts(old) != _pod_facts(new))
        min_ready = int(((ds or {}).get("spec") or {}).get("minReadySeconds") or 0)
        if ds is not None and min_ready > 0 and not podutil.is_pod_ready(old) and podutil.is_pod_ready(new):
            self.runner.queue.add_after(key_of(ds), min_ready + 1)

    def _pod_deleted(self, pod: Obj) -> None:
        ds = self._owner(pod)
        if ds is not None:
            self.expectations.deletion_observed(key_of(ds), pod_key(pod))
            self.runner.enqueue(key_of(ds))

    def _node_added(self, node: Obj) -> None:
        """addNode / deleteNode: every set that would run a pod there."""
        for ds in list(self.sets.store.values()):
            if du.node_should_run_daemon_pod(node, ds)[0]:
                self.runner.enqueue(key_of(ds))

    def _node_updated(self, old: Obj, new: Obj) -> None:
        """updateNode: the sets whose verdict on the node changed (only labels and spec can change it)."""
        if old["metadata"].get("labels") == new["metadata"].get("labels") and old.get("spec") == new.get("spec"):
            return
        for ds in list(self.sets.store.values()):
            if du.node_should_run_daemon_pod(old, ds) != du.node_should_run_daemon_pod(new, ds):
                self.runner.enqueue(key_of(ds))

    def _revision_added(self, revision: Obj) -> None:
        """addHistory: only an orphan wakes sets (that may adopt it); an owned revision is usually the set's own
        snapshot, which its sync made."""
        if revision["metadata"].get("deletionTimestamp"):
            self._revision_deleted(revision)
        elif controller_of(revision) is None:
            self._wake_owner_or_selecting(revision)

    def _revision_updated(self, old: Obj, new: Obj) -> None:
        """updateHistory: any change wakes the owner; an orphan wakes sets when its labels or reference change."""
        if old["metadata"].get("resourceVersion") != new["metadata"].get("resourceVersion"):
            self._wake_on_update(old, new, owned_changed=True)

    def _revision_deleted(self, revision: Obj) -> None:
        """deleteHistory: the owner is woken; nobody cares about a deleted orphan."""
        ds = self._owner(revision)
        if ds is not None:
            self.runner.enqueue(key_of(ds))

    # --- sync ------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        ds = pc.newest(self.sets.store.get(key), self.written.get(key))
        if ds is None:
            self.expectations.delete(key)
            return
        try:
            selector = _selector(ds)
        except ApiError as exc:  # validation refuses such a set; one stored before that is left alone
            log.warning("daemonset %s/%s: invalid selector: %s", key[0], key[1], exc.message)
            return
        if selector.empty:
            self._event(ds, "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is "
                                            "required.", "Warning")
            return
        if ds["metadata"].get("deletionTimestamp"):
            return
        revisions = await self._claim(ds, selector, self.revisions, "controllerrevisions")
        current, old = await self.history.construct(_with_kind(ds), revisions, self.pods.by_index(
            OWNER_UID_INDEX, ds["metadata"]["uid"]))
        hash_ = (current["metadata"].get("labels") or {}).get(du.REVISION_LABEL, "")
        node_pods = await self._node_pods(ds, selector)
        verdicts = du.verdicts(ds, self.nodes.store.values())  # one per node, for every step below
        if not self.expectations.satisfied(key):
            await self._write_status(ds, verdicts, node_pods, hash_, observed=False)
            return
        error: Exception | None = None
        try:
            await self._manage(ds, verdicts, node_pods, hash_)
            strategy = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("type", "RollingUpdate")
            if self.expectations.satisfied(key) and strategy == "RollingUpdate":
                # read afresh, as upstream's rollingUpdate lists again: a pod manage just deleted is terminating
                # now (its expectation was met by that event), so it is not deleted a second time
                node_pods = await self._node_pods(ds, selector)
                delete, create_on = du.rolling_update(ds, verdicts, node_pods, hash_, self.clock.now())
                await self._sync_nodes(ds, delete, create_on, hash_)
            await self.history.cleanup(ds, old, node_pods)
        except ApiError as exc:
            error = exc
        await self._write_status(ds, verdicts, node_pods, hash_, observed=True)
        if error is not None:
            raise error

    async def _claim(self, ds: Obj, selector: LabelSelector, informer: SharedInformerHandle,
                     resource: str) -> list[Obj]:
        """getDaemonPods / controlledHistories: what the set owns once matching orphans are adopted and owned
        objects that no longer match are released."""
        ns, uid = ds["metadata"].get("namespace", ""), ds["metadata"]["uid"]
        group_version = "apps/v1" if resource == "controllerrevisions" else "v1"
        candidates = {key_of(o): o for o in (*informer.by_index(OWNER_UID_INDEX, uid),
                                            *informer.by_index(ORPHAN_INDEX, ns))}
        ds_path = resource_path("daemonsets", ns, ds["metadata"]["name"], group_version="apps/v1")
        manager = RefManager(self.client, _with_kind(ds), selector,
                             lambda o: resource_path(resource, ns, o["metadata"]["name"], group_version=group_version),
                             recheck_owner(self.client, ds_path, uid))
        return await manager.claim(list(candidates.values()))

    async def _node_pods(self, ds: Obj, selector: LabelSelector) -> dict[str, list[Obj]]:
        """getNodesToDaemonPods: the set's pods by the node they run on or are pinned to; a finished pod that is
        already being deleted is no longer the controller's business."""
        out: dict[str, list[Obj]] = {}
        for pod in await self._claim(ds, selector, self.pods, "pods"):
            if pc.is_terminal(pod) and pod["metadata"].get("deletionTimestamp"):
                continue
            node = du.target_node_name(pod)
            if node is not None:
                out.setdefault(node, []).append(pod)
        return out

    async def _manage(self, ds: Obj, verdicts: dict[str, du.Verdict], node_pods: dict[str, list[Obj]],
                      hash_: str) -> None:
        """manage: per node, the pods to create and delete; unscheduled pods pinned to a node that is gone."""
        create_on: list[str] = []
        delete: list[str] = []
        now = self.clock.now()
        for name, verdict in verdicts.items():
            plan = du.pods_should_be_on_node(name, verdict, node_pods.get(name, []), ds, hash_, now,
                                             lambda n: self._failed_pod_in_backoff(ds, n))
            create_on += plan.create_on
            delete += plan.delete
            for pod in plan.finished:
                self._report_finished(ds, pod, name)
        for name, pods in node_pods.items():
            if name not in verdicts:
                delete += [p["metadata"]["name"] for p in pods if not (p.get("spec") or {}).get("nodeName")]
        await self._sync_nodes(ds, delete, create_on, hash_)

    def _failed_pod_in_backoff(self, ds: Obj, node: str) -> bool:
        """A failed pod waits for its node's back-off (the set is synced again when it is over); one let through
        starts the next back-off step at once, so a second failed pod on the node waits, as upstream's."""
        key = backoff_key(ds, node)
        left = self.backoff.in_backoff(key)
        if left > 0:
            self.runner.queue.add_after(key_of(ds), left)
            return True
        self.backoff.next(key)
        return False

    def _report_finished(self, ds: Obj, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") == "Failed":
            self._event(ds, "FailedDaemonPod", f"Found failed daemon pod {meta.get('namespace', '')}/{meta['name']} "
                                               f"on node {node}, will try to kill it", "Warning")
        else:
            self._event(ds, "SucceededDaemonPod", f"Found succeeded daemon pod {meta.get('namespace', '')}/"
                                                  f"{meta['name']} on node {node}, will try to delete it")

    async def _sync_nodes(self, ds: Obj, delete: list[str], create_on: list[str], hash_: str) -> None:
        """syncNodes: at most burstReplicas creations (in slow-start batches) and deletions, counted in the
        expectations first; the first error is raised once all are done."""
        key, ns = key_of(ds), ds["metadata"].get("namespace", "")
        create_on, delete = create_on[:self.burst], delete[:self.burst]
        if not create_on and not delete:
            return
        self.expectations.expect(key, len(create_on), [f"{ns}/{name}" for name in delete])
        template = du.new_pod_template(ds, hash_)
        nodes = iter(create_on)

        async def create() -> None:
            await self._create(ds, template, next(nodes))

        created, create_error = await slow_start_batch(len(create_on), SLOW_START_INITIAL_BATCH, create)
        for _ in range(len(create_on) - created):  # failed or never tried: their add events will not come
            self.expectations.creation_observed(key)
        results = await asyncio.gather(*(self._delete(ds, name) for name in delete), return_exceptions=True)
        errors = [create_error] + [r for r in results if isinstance(r, BaseException)]
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            raise error

    async def _create(self, ds: Obj, template: Obj, node: str) -> None:
        spec = dict(template.get("spec") or {})
        spec["affinity"] = du.replace_node_name_affinity(spec.get("affinity"), node)
        body = pod_from_template(_with_kind(ds), {**template, "spec": spec})
        try:
            pod = await self.client.create(resource_path("pods", ds["metadata"].get("namespace", "")), body)
        except ApiError as exc:
            if is_namespace_terminating(exc):
                return  # the namespace is going: so will every other pod; upstream records nothing
            self._event(ds, "FailedCreate", f"Error creating: {exc.message}", "Warning")
            raise
        self._event(ds, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")

    async def _delete(self, ds: Obj, name: str) -> None:
        ns = ds["metadata"].get("namespace", "")
        try:
            await self.client.delete(resource_path("pods", ns, name))
        except ApiError as exc:
            self.expectations.deletion_observed(key_of(ds), f"{ns}/{name}")  # no watch event will say so
            if exc.code == 404:
                return
            self._event(ds, "FailedDelete", f"Error deleting: {exc.message}", "Warning")
            raise
        self._event(ds, "SuccessfulDelete", f"Deleted pod: {name}")

    async def _write_status(self, ds: Obj, verdicts: dict[str, du.Verdict], node_pods: dict[str, list[Obj]],
                            hash_: str, observed: bool) -> None:
        """updateDaemonSetStatus / storeDaemonSetStatus: written when a count (or, after a full sync, the
        observed generation) changed; a conflict is retried once on a fresh read."""
        status = du.calculate_status(ds, verdicts, node_pods, hash_, self.clock.now())
        old = ds.get("status") or {}
        generation = ds["metadata"].get("generation", 1)
        if observed:
            status["observedGeneration"] = generation
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        if min_ready > 0 and status["numberReady"] != status["numberAvailable"]:
            self.runner.queue.add_after(key_of(ds), min_ready)  # a last line of defence against clock skew
        if all((old.get(k) or 0) == v for k, v in status.items()):  # a count of 0 is omitted from the status
            return
        meta = ds["metadata"]
        path = resource_path("daemonsets", meta.get("namespace", ""), meta["name"], "status", "apps/v1")
        try:
            self.written[key_of(ds)] = await self.client.request("PUT", path, {**ds, "status": {**old, **status}})
        except ApiError as exc:
            if exc.code != 409:
                raise
            fresh = await self.client.get(path.removesuffix("/status"))  # the role may read the set, not its status
            if fresh["metadata"].get("uid") == meta.get("uid"):
                self.written[key_of(ds)] = await self.client.request(
                    "PUT", path, {**fresh, "status": {**(fresh.get("status") or {}), **status}})

    def _event(self, ds: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        self.events.post(event_for(ds, reason, message, KIND, COMPONENT, self.clock.now(), event_type))
