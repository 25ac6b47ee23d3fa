"""VolumeBinding: mirrors pkg/scheduler/framework/plugins/volumebinding (and its binder.go).

- PreFilter sorts the pod's claims: bound, unbound with delayed binding (class
  `WaitForFirstConsumer`), unbound immediate. A missing or deleted claim, or an unbound immediate
  one, makes the pod unschedulable before any node is looked at (the PV controller binds those).
- Filter, per node: every bound claim's volume must admit the node (its node affinity); every
  delayed claim needs an Available volume that fits on that node (FindMatchingVolume, each volume
  used once) or a class whose provisioner can provision there.
- Reserve assumes the chosen node's bindings (volume → claim) and provisionings (the claim with
  `volume.kubernetes.io/selected-node`) in the VolumeCache; Unreserve drops them.
- PreBind writes them through the API (a volume's claimRef, a claim's selected-node annotation)
  and waits until the PV controller (and a provisioner) has bound every claim, as the claim
  informer shows it (checkBindings), up to `bindTimeoutSeconds` (600).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.interface import Client
from kubelite.clock import Clock
from kubelite.scheduler.cycle_state import CycleState, StateKey
from kubelite.scheduler.framework import SKIP, SUCCESS, Code, FilterResult, NodeVerdict, Rejection, Status
from kubelite.scheduler.nodetable import NodeTable
from kubelite.scheduler.plugins.volume_cache import VolumeCache
from kubelite.scheduler.podinfo import PodInfo

NAME = "VolumeBinding"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BIND_TIMEOUT = 600.0
POLL_PERIOD = 0.05  # reads the informer cache, not the API: cheap

Obj = dict[str, Any]


@dataclass
class NodeDecision:
    """What binding the pod on one node takes: static bindings (volume, claim) and claims to provision."""

    bindings: list[tuple[Obj, Obj]] = field(default_factory=list)
    provisions: list[Obj] = field(default_factory=list)


@dataclass
class PodVolumes:
    bound: list[Obj]
    delayed: list[Obj]
    per_node: dict[str, NodeDecision] = field(default_factory=dict)
    reserved: NodeDecision | None = None


STATE: StateKey[PodVolumes] = StateKey("PreFilter" + NAME)


def _node_obj(table: NodeTable, row: int) -> Obj:
    return {"metadata": {"name": table.names[row], "labels": table.labels[row]}}


def _node_term_fits(sc: Obj, labels: dict[str, str]) -> bool:
    """A class's allowedTopologies admit the node (no topologies: every node)."""
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    return any(all(labels.get(e.get("key", "")) in (e.get("values") or []) for e in t.get("matchLabelExpressions")
                   or []) for t in terms)


class BindHandle(Protocol):
    @property
    def client(self) -> Client: ...

    @property
    def clock(self) -> Clock: ...


class VolumeBinding(NodeVerdict):
    name = NAME

    def __init__(self, cache: VolumeCache, handle: BindHandle, bind_timeout: float = BIND_TIMEOUT) -> None:
        self.cache = cache
        self.handle = handle  # read at PreBind: the writes and the wait go through the scheduler's client
        self.bind_timeout = bind_timeout

    # --- PreFilter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> Status:
        names = vu.claim_names(pod.obj)
        if not names:
            return SKIP
        bound, delayed, immediate = [], [], []
        for name in names:
            claim = self.cache.claim(pod.namespace, name)
            if claim is None:
                return Status(Code.UnschedulableAndUnresolvable, (f'persistentvolumeclaim "{name}" not found',), NAME)
            if claim["metadata"].get("deletionTimestamp"):
                return Status(Code.UnschedulableAndUnresolvable,
                              (f'persistentvolumeclaim "{name}" is being deleted',), NAME)
            if (claim.get("spec") or {}).get("volumeName"):
                pv_name = claim["spec"]["volumeName"]
                if (claim.get("status") or {}).get("phase") == "Lost" and self.cache.volume(pv_name) is None:
                    return Status(Code.UnschedulableAndUnresolvable, (
                        f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{pv_name}"',), NAME)
                bound.append(claim)
            elif self.cache.delay_binding(claim):
                delayed.append(claim)
            else:
                immediate.append(claim)
        if immediate:
            return Status(Code.UnschedulableAndUnresolvable, (UNBOUND_IMMEDIATE,), NAME)
        state.write(STATE, PodVolumes(bound, delayed))
        return SUCCESS

    # --- Filter -----------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable) -> FilterResult | None:
        pv_state: PodVolumes | None = state.get(STATE)
        if pv_state is None:
            return None
        reasons: dict[str, np.ndarray[Any, Any]] = {}
        ok = np.ones(table.n, np.bool_)
        for row in range(table.n):
            verdict = self.find_pod_volumes(pv_state, _node_obj(table, row))
            if isinstance(verdict, NodeDecision):
                pv_state.per_node[table.names[row]] = verdict
                continue
            ok[row] = False
            for reason in verdict:
                reasons.setdefault(reason, np.zeros(table.n, np.bool_))[row] = True
        return FilterResult(ok, [Rejection(r, mask, Code.UnschedulableAndUnresolvable) for r, mask in reasons.items()])

    def find_pod_volumes(self, pv_state: PodVolumes, node: Obj) -> NodeDecision | list[str]:
        """FindPodVolumes: the node's decision, or the reasons it cannot take the pod's volumes."""
        labels, name = node["metadata"]["labels"], node["metadata"]["name"]
        reasons: list[str] = []
        for claim in pv_state.bound:
            pv = self.cache.volume(claim["spec"]["volumeName"])
            if pv is None:
                reasons.append(ERR_REASON_PV_NOT_EXIST)
            elif not vu.node_affinity_fits(pv, labels, name):
                reasons.append(ERR_REASON_NODE_CONFLICT)
        decision = NodeDecision()
        chosen: set[str] = set()
        unmatched: list[Obj] = []
        for claim in pv_state.delayed:
            pv = vu.find_matching_volume(claim, self.cache.volumes(), node, chosen, delay_binding=True)
            if pv is None:
                unmatched.append(claim)
            else:
                chosen.add(pv["metadata"]["name"])
                decision.bindings.append((pv, claim))
        for claim in unmatched:
            sc = self.cache.storage_class(vu.storage_class(claim))
            if sc is None or sc.get("provisioner") in (None, "", NO_PROVISIONER) or not _node_term_fits(sc, labels):
                reasons.append(ERR_REASON_BIND_CONFLICT)
                break
            decision.provisions.append(claim)
        return list(dict.fromkeys(reasons)) if reasons else decision

    # --- Reserve / Unreserve ----------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """AssumePodVolumes: the chosen volumes bound and the claims to provision annotated, in the cache."""
        pv_state: PodVolumes | None = state.get(STATE)
        if pv_state is None:
            return SUCCESS
        decision = pv_state.per_node.get(node)
        if decision is None:
            return Status(Code.Error, (f"no volume decision for node {node}",), NAME)
        assumed = NodeDecision()
        for pv, claim in decision.bindings:
            if vu.bound_to_claim(pv, claim):
                continue
            new_pv = copy.deepcopy(pv)
            meta = claim["metadata"]
            new_pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                          "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                                          "resourceVersion": meta.get("resourceVersion")}
            new_pv["metadata"].setdefault("annotations", {})[vu.ANN_BOUND_BY_CONTROLLER] = "yes"
            self.cache.assumed_volumes[new_pv["metadata"]["name"]] = new_pv
            assumed.bindings.append((new_pv, claim))
        for claim in decision.provisions:
            new_claim = copy.deepcopy(claim)
            new_claim["metadata"].setdefault("annotations", {})[vu.ANN_SELECTED_NODE] = node
            self.cache.assumed_claims[(claim["metadata"]["namespace"], claim["metadata"]["name"])] = new_claim
            assumed.provisions.append(new_claim)
        pv_state.reserved = assumed
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        pv_state: PodVolumes | None = state.get(STATE)
        if pv_state is not None and pv_state.reserved is not None:
            self._forget(pv_state.reserved)

    def _forget(self, decision: NodeDecision) -> None:
        for pv, _ in decision.bindings:
            self.cache.assumed_volumes.pop(pv["metadata"]["name"], None)
        for claim in decision.provisions:
            self.cache.assumed_claims.pop((claim["metadata"]["namespace"], claim["metadata"]["name"]), None)

    # --- PreBind ----------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """BindPodVolumes: write the assumed bindings, then wait until every claim of the pod is bound."""
        pv_state: PodVolumes | None = state.get(STATE)
        if pv_state is None or pv_state.reserved is None:
            return SUCCESS
        decision = pv_state.reserved
        try:
            for pv, _ in decision.bindings:
                path = resource_path("persistentvolumes", name=pv["metadata"]["name"])
                await self.handle.client.request("PUT", path, pv)
            for claim in decision.provisions:
                ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
                await self.handle.client.request("PUT", resource_path("persistentvolumeclaims", ns, name), claim)
        except ApiError as exc:
            self._forget(decision)
            return Status(Code.Error, (f"binding volumes: {exc}",), NAME)
        claims = [c for _, c in decision.bindings] + decision.provisions + pv_state.delayed
        status = await self._wait_bound(pod.namespace, {c["metadata"]["name"] for c in claims})
        self._forget(decision)
        return status

    async def _wait_bound(self, namespace: str, names: set[str]) -> Status:
        deadline = self.handle.clock.monotonic() + self.bind_timeout
        while True:
            waiting = []
            for name in sorted(names):
                claim = self.cache.stored_claim(namespace, name)
                if claim is None:
                    return Status(Code.Error, (f'binding volumes: persistentvolumeclaim "{name}" not found',), NAME)
                if not (claim["metadata"].get("annotations") or {}).get(vu.ANN_BIND_COMPLETED):
                    waiting.append(name)
            if not waiting:
                return SUCCESS
            if self.handle.clock.monotonic() >= deadline:
                return Status(Code.Error, (f"binding volumes: timed out waiting for the condition "
                                           f"(claims {', '.join(waiting)} not bound)",), NAME)
            await self.handle.clock.sleep(POLL_PERIOD)
