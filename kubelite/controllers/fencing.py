"""The fencing controller (S4, seed 002): fence unreachable nodes, then let their pods move.

Each pass (every `period` seconds) it
1. picks candidates (fencing_policy): unreachable longer than `delay`, in a pool, holding
   StatefulSet or ReadWriteOnce pods; highest pod priority first; at most `maxConcurrent` at once;
   none whose fence would take PodDisruptionBudget-healthy pods beyond what the budgets allow
   (event FenceHeldByDisruptionBudget once per hold; the pass after the budget allows it, it goes);
   and none the zone brake holds (fencing_policy.ZoneBrake, upstream's handleDisruption: no fence in a
   fully disrupted zone or while every zone is, none in a small partially disrupted zone, and at most
   `fenceRate` a second per zone; events FenceHeldByZoneDisruption, FenceHeldByClusterDisruption,
   FenceRateLimited once per hold). A fence not yet confirmed whose zone the brake comes to stop is
   abandoned before its next attempt (its NodeFence deleted), freeing its slot;
2. fences each in a task: a NodeFence (kubelite.io/v1alpha1, named after the node) records the
   phase, attempts, agent and message; the pool's agents are tried in order until one confirms;
   a round with no confirmation is Failed and retried with doubling back-off; a node that comes
   back Ready before any confirmation has its NodeFence deleted (nothing was fenced);
3. after a **Succeeded** fence, and only then: sets the Node condition `kubelite.io/Fenced` = True
   (attachdetach's `node_fenced` hook then deletes the node's VolumeAttachments), taints the node
   `kubelite.io/fenced:NoSchedule`, and force deletes (grace 0) every pod bound to the node, so
   StatefulSets recreate them elsewhere;
4. clears the Fenced condition and the taint of a node whose NodeFence was deleted — `kubectl delete nodefence
   NODE` is the administrator's word that the node may run pods again (README, Fencing).

Nothing is force deleted without a Succeeded NodeFence for the node. Errors are logged and the
next pass carries on. Events on the Node: FencingNode, FenceFailed, NodeFenced, FenceCleared, and the
holds named in 1.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path
from typing import Any

from kubelite.api import disruption
from kubelite.api.errors import ApiError
from kubelite.client.events import EventSink, event_for
from kubelite.client.http import STRATEGIC_PATCH, resource_path
from kubelite.client.informer import NAMESPACE_INDEX, NODE_NAME_INDEX, Handlers, by_node_name
from kubelite.client.interface import Client
from kubelite.clock import Clock, rfc3339
from kubelite.controllers import fencing_policy as policy
from kubelite.controllers import node_health as nh
from kubelite.controllers import taints as tt
from kubelite.controllers.attachdetach import FENCED_CONDITION
from kubelite.controllers.fencing_agents import Outcome, Target, node_address
from kubelite.controllers.fencing_config import FencingConfig, build_agent, load
from kubelite.controllers.informers import shared_informer
from kubelite.controllers.runner import run_synced

log = logging.getLogger("kubelite.controllers.fencing")

Obj = dict[str, Any]
GROUP_VERSION = "kubelite.io/v1alpha1"
COMPONENT = "fencing-controller"
# Kept on a fenced node until the fence is cleared: the scheduler places nothing there meanwhile (its agent
# would refuse it: NodeFenced), though the node lifecycle controller lifts its own taints once it is Ready.
FENCED_TAINT: Obj = {"key": "kubelite.io/fenced", "effect": "NoSchedule"}


def fences_path(name: str = "", subresource: str = "") -> str:
    return resource_path("nodefences", name=name, subresource=subresource, group_version=GROUP_VERSION)


class FencingController:
    def __init__(self, client: Client, clock: Clock, config: FencingConfig | None = None) -> None:
        self.client = client
        self.clock = clock
        self.config = config or FencingConfig()  # no pools: nothing is ever fenced (seed 002's safe default)
        self.events = EventSink(client, clock)
        self.nodes = shared_informer(client, clock, "/api/v1/nodes")
        self.pods = shared_informer(client, clock, "/api/v1/pods")
        self.pods.add_index(NODE_NAME_INDEX, by_node_name)
        self.claims = shared_informer(client, clock, "/api/v1/persistentvolumeclaims")
        self.pdbs = shared_informer(client, clock, resource_path("poddisruptionbudgets", group_version="policy/v1"))
        self.fences = shared_informer(client, clock, fences_path())
        self.leases = shared_informer(client, clock, resource_path("leases", "kube-node-lease",
                                                                   group_version="coordination.k8s.io/v1"),
                                      Handlers(self._lease_seen, lambda _, n: self._lease_seen(n)))
        self.informers = (self.nodes, self.pods, self.claims, self.pdbs, self.fences, self.leases)
        self.renewals: dict[str, tuple[str, float]] = {}  # node -> (renewTime, monotonic when first seen)
        self.running: dict[str, asyncio.Task[None]] = {}
        self.held: dict[str, tuple[str, str]] = {}  # node -> (reason, message) holding its fence: evented once
        self.brake = policy.ZoneBrake(self.config)

    def _lease_seen(self, lease: Obj) -> None:
        """The `self` agent's clock: when this controller saw each node's Lease renewTime change."""
        name, stamp = lease["metadata"]["name"], str((lease.get("spec") or {}).get("renewTime") or "")
        if self.renewals.get(name, ("",))[0] != stamp:
            self.renewals[name] = (stamp, self.clock.monotonic())

    def last_renewal_seen(self, node: str) -> float | None:
        seen = self.renewals.get(node)
        return seen[1] if seen else None

    async def run(self) -> None:
        await run_synced(self.informers, (self._loop,), alongside=(self.events.run,))

    async def _loop(self) -> None:
        try:
            while True:
                try:
                    await self.reconcile()
                except Exception:
                    log.exception("fencing pass failed; the next pass tries again")
                await self.clock.sleep(self.config.period)
        finally:
            for task in self.running.values():
                task.cancel()

    async def reconcile(self) -> None:
        mono = self.clock.monotonic()
        self.brake.observe(self.nodes.store.values(), self.clock.now(), mono)
        fences = {f["spec"]["nodeName"]: f for f in self.fences.store.values()}
        for node in list(self.nodes.store.values()):
            name = node["metadata"]["name"]
            fence = fences.get(name)
            if (fence or {}).get("status", {}).get("phase") == "Succeeded":
                await self._after_fence(node, fence or {})
            elif fence is None and policy.is_fenced(node) and name not in self.running:
                await self._clear(node)
        for name in [n for n, t in self.running.items() if t.done()]:
            del self.running[name]
        free = self.config.max_concurrent - len(self.running)
        if free <= 0:
            return
        pods_on = functools.partial(self.pods.by_index, NODE_NAME_INDEX)
        chosen = policy.candidates(
            self.nodes.store.values(), pods_on, self.claims.get,
            lambda n: self.config.pool_for(n["metadata"].get("labels")) is not None, self.clock.now(),
            self.config.delay, self.budgets_of, self.brake.resumed_at)
        admitted, held = policy.admit(
            [c for c in chosen if c.node not in self.running and
             (fences.get(c.node) or {}).get("status", {}).get("phase") != "Succeeded"],
            self.running, pods_on, self.budgets_of, free, self.brake, mono)
        for h in held:
            if self.held.get(h.node) != (h.reason, h.message) and (held_node := self.nodes.get("", h.node)):
                log.info("fence of node %s held (%s): %s", h.node, h.reason, h.message)
                self._event(held_node, h.reason, f"Not fencing node {h.node} yet: {h.message}")
        self.held = {h.node: (h.reason, h.message) for h in held}
        for candidate in admitted:
            self.running[candidate.node] = asyncio.create_task(self.fence(candidate.node),
                                                               name=f"fence {candidate.node}")

    def budgets_of(self, pod: Obj) -> list[tuple[str, disruption.Budget]]:
        """The PodDisruptionBudgets that count `pod`, each with its budget as the eviction API reads it."""
        ns = pod["metadata"].get("namespace", "")
        pdbs = [b for b in self.pdbs.by_index(NAMESPACE_INDEX, ns) if disruption.counts(b, pod)]
        if not pdbs:
            return []
        pods = self.pods.by_index(NAMESPACE_INDEX, ns)
        return [(f"{ns}/{b['metadata']['name']}", disruption.current(b, pods)) for b in pdbs]

    # --- one fence ------------------------------------------------------------------------------------

    async def fence(self, name: str) -> None:
        """Fence node `name` until an agent confirms (or the node recovers); never raises."""
        backoff = self.config.retry_initial
        while True:
            try:
                done = await self._attempt(name)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fencing node %s failed; retrying", name)
                done = False
            if done:
                return
            await self.clock.sleep(backoff)
            backoff = min(self.config.retry_max, backoff * 2)

    async def _attempt(self, name: str) -> bool:
        node = self.nodes.get("", name)
        if node is None or policy.unready_since(node) is None:
            await self._abandon(name, "the node is Ready again (or gone): no fence needed")
            return True
        pool = self.config.pool_for(node["metadata"].get("labels"))
        if pool is None:
            return True
        if (stop := self.brake.stopped(name, nh.zone_key(node))) is not None:
            # Its zone (or the whole cluster) went down since the fence was decided: the fence waits its turn
            # again as a candidate, and its slot is free meanwhile.
            self.held[name] = (stop.reason, stop.message)
            self._event(node, stop.reason, f"Not fencing node {name} any further for now: {stop.message}")
            await self._abandon(name, stop.message)
            return True
        fence = await self._fence_object(name)
        attempts = int((fence.get("status") or {}).get("attempts") or 0) + 1
        if attempts == 1:
            self._event(node, "FencingNode", f"Fencing node {name} (pool {pool.name}): unreachable, holds pods "
                                             f"that must not run twice")
        outcome = Outcome(False, "no agent")
        for spec in pool.agents:
            agent = build_agent(spec, self.clock, self.config.self_fence_margin, self.last_renewal_seen)
            fence = await self._status(fence, {"phase": "Running", "attempts": attempts, "agent": agent.name,
                                               "message": f"attempt {attempts}: running the {agent.name} agent"})
            target = Target(name, node_address(node), name, self.nodes.get("", name) or node)
            outcome = await agent.fence(target)
            current = self.nodes.get("", name)
            if current is not None and policy.unready_since(current) is None and not outcome.fenced:
                await self._abandon(name, "the node is Ready again: no fence needed")
                return True
            if outcome.fenced:
                await self._status(fence, {"phase": "Succeeded", "attempts": attempts, "agent": agent.name,
                                           "message": outcome.message, "fencedTime": rfc3339(self.clock.now())})
                self._event(node, "NodeFenced", f"Node {name} fenced by the {agent.name} agent: {outcome.message}")
                log.info("node %s fenced by the %s agent: %s", name, agent.name, outcome.message)
                await self._set_condition(name, outcome.message)
                return True
            log.warning("fence agent %s failed for node %s: %s", agent.name, name, outcome.message)
        await self._status(fence, {"phase": "Failed", "attempts": attempts, "agent": pool.agents[-1].kind,
                                   "message": outcome.message})
        self._event(node, "FenceFailed", f"Fencing node {name} failed (attempt {attempts}): {outcome.message}",
                    "Warning")
        return False

    async def _fence_object(self, name: str) -> Obj:
        existing = self.fences.get("", name)
        if existing is not None:
            return existing
        body = {"apiVersion": GROUP_VERSION, "kind": "NodeFence", "metadata": {"name": name},
                "spec": {"nodeName": name}}
        try:
            created: Obj = await self.client.create(fences_path(), body)
        except ApiError as exc:
            if exc.code != 409:
                raise
            created = await self.client.get(fences_path(name))
        created = await self._status(created, {"phase": "Pending", "attempts": 0, "message": "fence decided"})
        return created

    async def _status(self, fence: Obj, status: Obj) -> Obj:
        out: Obj = await self.client.request("PUT", fences_path(fence["metadata"]["name"], "status"),
                                             {**fence, "status": status})
        self.fences.add(out)
        return out

    async def _abandon(self, name: str, why: str) -> None:
        fence = self.fences.get("", name)
        if fence is None or (fence.get("status") or {}).get("phase") == "Succeeded":
            return
        log.info("fence of node %s abandoned: %s", name, why)
        try:
            await self.client.delete(fences_path(name), {"preconditions": {"uid": fence["metadata"]["uid"]}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    # --- after a confirmed fence, and clearing ----------------------------------------------------------

    async def _set_condition(self, name: str, message: str) -> None:
        stamp = rfc3339(self.clock.now())
        cond = {"type": FENCED_CONDITION, "status": "True", "reason": "FenceSucceeded", "message": message,
                "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        await self.client.patch(resource_path("nodes", name=name, subresource="status"),
                                {"status": {"conditions": [cond]}}, STRATEGIC_PATCH)

    async def _after_fence(self, node: Obj, fence: Obj) -> None:
        """A Succeeded fence: the condition set (volumes detach), then every pod on the node force deleted."""
        name = node["metadata"]["name"]
        if not policy.is_fenced(node):
            await self._set_condition(name, str((fence.get("status") or {}).get("message") or "fenced"))
        if not tt.taint_exists(tt.taints_of(node), FENCED_TAINT):
            await tt.swap_node_taints(self.client, node, [FENCED_TAINT], [], self.clock.now())
        for pod in self.pods.by_index(NODE_NAME_INDEX, name):
            meta = pod["metadata"]
            try:
                await self.client.delete(resource_path("pods", meta["namespace"], meta["name"]),
                                         {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                continue
            log.info("force deleted pod %s/%s of fenced node %s", meta["namespace"], meta["name"], name)
            self.events.post(event_for({**pod, "apiVersion": "v1"}, "FencedNodePodDeleted",
                                       f"Node {name} was fenced: pod force deleted so it can run elsewhere",
                                       "Pod", COMPONENT, self.clock.now(), "Warning"))

    async def _clear(self, node: Obj) -> None:
        """The NodeFence was deleted: the node may run pods again (its old pods are gone from the API)."""
        name = node["metadata"]["name"]
        conditions = [c for c in (node.get("status") or {}).get("conditions") or []
                      if c.get("type") != FENCED_CONDITION]
        try:
            await self.client.request("PUT", resource_path("nodes", name=name, subresource="status"),
                                      {**node, "status": {**node.get("status", {}), "conditions": conditions}})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            return
        await tt.swap_node_taints(self.client, node, [], [FENCED_TAINT], self.clock.now())
        self._event(node, "FenceCleared", f"NodeFence {name} deleted: node {name} may run pods again")

    def _event(self, node: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        self.events.post(event_for({**node, "apiVersion": "v1", "kind": "Node"}, reason, message, "Node",
                                   COMPONENT, self.clock.now(), kind))


def fencing_factory(path: Path | None) -> dict[str, Any]:
    """The `fencing` controller's factory configured from `--fencing-config` (none: the default, fencing nothing);
    raises FencingConfigError for a bad file."""
    if path is None:
        return {}
    return {"fencing": functools.partial(FencingController, config=load(path))}
