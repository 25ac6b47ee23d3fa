"""What a DaemonSet wants of each node, as pure functions over wire dicts (pkg/controller/daemon/util and the
decision halves of daemon_controller.go / update.go).

- **Placement** (`Placement.verdict`, `verdicts`): the pod the set would make for a node — its template with the
  daemon tolerations added (AddOrUpdateDaemonPodTolerations) — must match the node's name, the template's
  nodeSelector and required node affinity, and tolerate its NoSchedule/NoExecute taints. A pod that tolerates
  only the NoExecute ones may keep running where it is but is not started (`should_continue_running`).
  A sync computes the verdict on every node once and hands the table to each step below.
  The node-selector match is `kubelite.api.volumes.node_selector_matches`, the per-node form of the scheduler's
  NodeAffinity filter (the scheduler's own plugin works on its columnar node table, and the components may not
  import one another); taints are judged by `taints.tolerates`, the node controllers' helper.
- **Pods** (`new_pod_template`): the template labelled with `controller-revision-hash` and
  `pod-template-generation`, and per node a required affinity `matchFields metadata.name In [node]`
  (ReplaceDaemonSetPodNodeNameNodeAffinity), so the default scheduler binds it there.
- **Per node** (`pods_should_be_on_node`): which nodes need a pod and which pods go (podsShouldBeOnNode).
- **Rolling update** (`rolling_update`): which old pods to delete (maxUnavailable) or which nodes get a
  surge pod (maxSurge).
- **Status** (`calculate_status`): the counts updateDaemonSetStatus writes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubelite.api.strconv import parse_int
from kubelite.api.volumes import node_selector_matches
from kubelite.clock import parse_rfc3339
from kubelite.controllers import podutil, rollout
from kubelite.controllers.taints import NO_EXECUTE, NO_SCHEDULE, NOT_READY, UNREACHABLE, tolerates

Obj = dict[str, Any]
REVISION_LABEL = "controller-revision-hash"  # DefaultDaemonSetUniqueLabelKey
GENERATION_LABEL = "pod-template-generation"  # DaemonSetTemplateGenerationKey
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
NODE_NAME_FIELD = "metadata.name"

# AddOrUpdateDaemonPodTolerations, in upstream's order: (key, effect); NoExecute ones carry no tolerationSeconds.
DAEMON_TOLERATIONS = ((NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE),
                      ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
                      ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
                      ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
                      ("node.kubernetes.io/unschedulable", NO_SCHEDULE))
NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", NO_SCHEDULE)  # only for hostNetwork pods


# --- the pod a set makes ------------------------------------------------------------------------------


def _same_toleration(a: Obj, b: Obj) -> bool:
    """Toleration.MatchToleration: same key, operator, value and effect."""
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))


def add_or_update_toleration(spec: Obj, toleration: Obj) -> None:
    """v1helper.AddOrUpdateTolerationInPodSpec: replace a matching toleration, else append."""
    tolerations = list(spec.get("tolerations") or [])
    for i, existing in enumerate(tolerations):
        if _same_toleration(existing, toleration):
            tolerations[i] = toleration
            break
    else:
        tolerations.append(toleration)
    spec["tolerations"] = tolerations


def add_daemon_tolerations(spec: Obj) -> None:
    """AddOrUpdateDaemonPodTolerations: daemon pods survive node problems and pressure taints."""
    extra = (NETWORK_UNAVAILABLE,) if spec.get("hostNetwork") else ()
    for key, effect in (*DAEMON_TOLERATIONS, *extra):
        add_or_update_toleration(spec, {"key": key, "operator": "Exists", "effect": effect})


def template_generation(ds: Obj) -> int | None:
    """util.GetTemplateGeneration as its callers use it: the apps/v1 annotation, None when absent or when
    strconv.ParseInt refuses it (upstream then goes on without it, and the revision hash decides)."""
    raw = (ds["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION)
    if raw is None:
        return None
    try:
        return parse_int(str(raw))
    except ValueError:
        return None


def new_pod_template(ds: Obj, hash_: str) -> Obj:
    """CreatePodTemplate: the set's template with the daemon tolerations, the revision hash and the template
    generation labels."""
    template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
    meta = template.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    generation = template_generation(ds)
    if generation is not None:
        labels[GENERATION_LABEL] = str(generation)
    labels[REVISION_LABEL] = hash_
    add_daemon_tolerations(template.setdefault("spec", {}))
    return template


def replace_node_name_affinity(affinity: Obj | None, node_name: str) -> Obj:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes one term holding only
    `metadata.name In [node]`, so the pod fits exactly that node; preferred terms and pod (anti-)affinity stay."""
    out = copy.deepcopy(affinity or {})
    node_affinity = out.setdefault("nodeAffinity", {})
    term = {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    return out


def target_node_name(pod: Obj) -> str | None:
    """GetTargetNodeName: the pod's node, or for a pod not yet bound the node its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            values = f.get("values") or []
            if f.get("key") == NODE_NAME_FIELD and f.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def is_pod_updated(pod: Obj, hash_: str, generation: int | None) -> bool:
    """IsPodUpdated: the pod carries the current revision hash (or, for pods of old controllers, the current
    template generation)."""
    labels = pod["metadata"].get("labels") or {}
    return (bool(hash_) and labels.get(REVISION_LABEL) == hash_) or \
        (generation is not None and labels.get(GENERATION_LABEL) == str(generation))


# --- placement ------------------------------------------------------------------------------------------


def _untolerated(taints: Iterable[Obj], tolerations: list[Obj], effects: tuple[str, ...]) -> bool:
    """FindMatchingUntoleratedTaint (filtered by effect) found one."""
    return any(t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations) for t in taints)


Verdict = tuple[bool, bool]  # (should run, should continue running) the set's pod on a node
NO_VERDICT: Verdict = (False, False)


@dataclass(frozen=True)
class Placement:
    """What of a set's template decides its nodes, read once per set per sync. Upstream's NodeShouldRunDaemonPod
    builds the set's pod, daemon tolerations added, for every node it judges; rebuilding those tolerations per
    node was most of a no-op sync at 5,000 nodes, so the verdicts of a sync share one Placement."""

    node_name: str | None
    node_selector: dict[str, str]
    required: Obj | None
    tolerations: list[Obj]

    @classmethod
    def of(cls, ds: Obj) -> Placement:
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        with_daemon: Obj = {"tolerations": spec.get("tolerations"), "hostNetwork": spec.get("hostNetwork")}
        add_daemon_tolerations(with_daemon)  # a copy of the list: the template stays as it is
        return cls(spec.get("nodeName") or None, spec.get("nodeSelector") or {},
                   ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                       "requiredDuringSchedulingIgnoredDuringExecution"), with_daemon["tolerations"])

    def verdict(self, node: Obj) -> Verdict:
        """NodeShouldRunDaemonPod: the node's name, the nodeSelector and required node affinity must match, and
        its NoSchedule/NoExecute taints be tolerated; tolerating only the NoExecute ones keeps a pod running."""
        name = node["metadata"]["name"]
        if self.node_name not in (None, name):
            return NO_VERDICT
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return NO_VERDICT
        if not node_selector_matches(self.required, labels, name):
            return NO_VERDICT
        taints = (node.get("spec") or {}).get("taints") or []
        if taints and _untolerated(taints, self.tolerations, (NO_SCHEDULE, NO_EXECUTE)):
            return False, not _untolerated(taints, self.tolerations, (NO_EXECUTE,))
        return True, True


def node_should_run_daemon_pod(node: Obj, ds: Obj) -> Verdict:
    """NodeShouldRunDaemonPod for one node (the node event handlers); a sync judges all nodes with `verdicts`."""
    return Placement.of(ds).verdict(node)


def verdicts(ds: Obj, nodes: Iterable[Obj]) -> dict[str, Verdict]:
    """The set's verdict on every node, computed once per sync and shared by its steps (manage, the rolling
    update and the status), as upstream recomputes it in each."""
    placement = Placement.of(ds)
    return {node["metadata"]["name"]: placement.verdict(node) for node in nodes}


# --- per node -------------------------------------------------------------------------------------------


def allows_surge(ds: Obj) -> bool:
    """AllowsSurge: a RollingUpdate strategy with a non-zero maxSurge."""
    strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    try:
        return rollout.scaled_value((strategy.get("rollingUpdate") or {}).get("maxSurge"), 1, True) != 0
    except ValueError:
        return False


def _created(pod: Obj) -> float:
    stamp = pod["metadata"].get("creationTimestamp")
    return parse_rfc3339(stamp) if isinstance(stamp, str) else 0.0


def by_creation_and_phase(pods: Iterable[Obj]) -> list[Obj]:
    """podByCreationTimestampAndPhase: pods bound to a node first (a pending one may never start), then the
    oldest, then by name; despite its name upstream's order does not look at the phase."""
    pods = list(pods)
    if len(pods) <= 1:
        return pods  # the usual node: nothing to order, no timestamps to parse
    return sorted(pods, key=lambda p: (not (p.get("spec") or {}).get("nodeName"), _created(p),
                                       p["metadata"]["name"]))


@dataclass
class NodePlan:
    """What the manage loop does on a node: nodes to give a pod, pods to delete (by name), and which of those
    are failed or succeeded pods (an event each; a failed one starts the node's back-off)."""

    create_on: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    finished: list[Obj] = field(default_factory=list)


def pods_should_be_on_node(name: str, verdict: Verdict, pods: list[Obj], ds: Obj, hash_: str, now: float,
                           in_backoff: Callable[[str], bool]) -> NodePlan:
    """podsShouldBeOnNode on node `name`, given the set's verdict on it: a missing pod is created; succeeded and
    failed pods are deleted (a failed one not while `in_backoff(name)`, which the caller also advances for each
    failed pod it lets through: so a second failed pod on the node waits for the next round); without surge only
    the oldest running pod stays; with surge an old and a new pod may both stay while the new one is not yet
    available."""
    plan = NodePlan()
    should_run, should_continue = verdict
    if should_run and not pods:
        plan.create_on.append(name)
        return plan
    if not should_continue:
        plan.delete += [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")]
        return plan
    running: list[Obj] = []
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or (phase == "Failed" and in_backoff(name)):
            continue
        if phase in ("Failed", "Succeeded"):
            plan.finished.append(pod)
            plan.delete.append(pod["metadata"]["name"])
        else:
            running.append(pod)
    if len(running) <= 1:  # nothing to prune; with surge a node whose pods all went needs one at once
        if not running and should_run and allows_surge(ds):
            plan.create_on.append(name)
        return plan
    running = by_creation_and_phase(running)
    if not allows_surge(ds):
        plan.delete += [p["metadata"]["name"] for p in running[1:]]
        return plan
    oldest_new = next((p for p in running if _revision(p) == hash_), None)
    oldest_old = next((p for p in running if _revision(p) != hash_), None)
    plan.delete += [p["metadata"]["name"] for p in running if p is not oldest_new and p is not oldest_old]
    if oldest_new is not None and oldest_old is not None and (
            not podutil.is_pod_ready(oldest_old) or
            podutil.is_pod_available(oldest_new, _min_ready(ds), now)):
        plan.delete.append(oldest_old["metadata"]["name"])
    return plan


def _revision(pod: Obj) -> str:
    return str((pod["metadata"].get("labels") or {}).get(REVISION_LABEL, ""))


def _min_ready(ds: Obj) -> int:
    return int((ds.get("spec") or {}).get("minReadySeconds") or 0)


# --- rolling update -------------------------------------------------------------------------------------


def find_updated_pods_on_node(pods: list[Obj], hash_: str, generation: int | None
                              ) -> tuple[Obj | None, Obj | None, bool]:
    """findUpdatedPodsOnNode: (new pod, old pod, ok) among the pods not being deleted; not ok when there are
    several of either (the manage loop prunes them first). `generation` is the set's template_generation."""
    new: Obj | None = None
    old: Obj | None = None
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if is_pod_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def surge_and_unavailable(ds: Obj, desired: int) -> tuple[int, int]:
    """SurgeCount and UnavailableCount (both rounding up); neither set means maxUnavailable 1."""
    strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge = rollout.scaled_value(rolling.get("maxSurge"), desired, True) \
        if strategy.get("type", "RollingUpdate") == "RollingUpdate" else 0
    unavailable = rollout.scaled_value(rolling.get("maxUnavailable"), desired, True)
    if desired > 0 and surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def rolling_update(ds: Obj, verdicts: dict[str, Verdict], node_pods: dict[str, list[Obj]], hash_: str,
                   now: float) -> tuple[list[str], list[str]]:
    """rollingUpdate: (old pods to delete, nodes to create a new pod on). `verdicts` holds the set's verdict on
    every node, `node_pods` every node with pods of the set; nodes that should run one are added here
    (updatedDesiredNodeCounts)."""
    desired = 0
    node_pods = dict(node_pods)
    for name, (should_run, _) in verdicts.items():
        if should_run:
            desired += 1
            node_pods.setdefault(name, [])
    surge, unavailable = surge_and_unavailable(ds, desired)
    min_ready = _min_ready(ds)

    def available(pod: Obj) -> bool:
        return podutil.is_pod_available(pod, min_ready, now)

    if surge == 0:
        return _delete_for_update(ds, node_pods, hash_, unavailable, available), []
    return _surge_for_update(ds, verdicts, node_pods, hash_, surge, desired, available)


def _delete_for_update(ds: Obj, node_pods: dict[str, list[Obj]], hash_: str, max_unavailable: int,
                       available: Callable[[Obj], bool]) -> list[str]:
    """Without surge: delete old pods while the new and missing ones stay within maxUnavailable; an old pod
    that is not available anyway is always replaced, and counts against the budget like any unavailable node."""
    num_unavailable = 0
    generation = template_generation(ds)
    replace: list[str] = []
    candidates: list[str] = []
    for name in sorted(node_pods):
        new, old, ok = find_updated_pods_on_node(node_pods[name], hash_, generation)
        if not ok or (old is None) == (new is None):
            num_unavailable += 1  # the manage loop creates or prunes here
        elif new is not None:
            num_unavailable += not available(new)
        elif old is not None and not available(old):
            replace.append(old["metadata"]["name"])
            num_unavailable += 1
        elif old is not None and num_unavailable < max_unavailable:
            candidates.append(old["metadata"]["name"])
    room = min(max(0, max_unavailable - num_unavailable), len(candidates))
    return replace + candidates[:room]


def _surge_for_update(ds: Obj, verdicts: dict[str, Verdict], node_pods: dict[str, list[Obj]], hash_: str,
                      max_surge: int, desired: int, available: Callable[[Obj], bool]
                      ) -> tuple[list[str], list[str]]:
    """With surge: a new pod beside each old one (at most maxSurge waiting to become available at once, at
    once where the old pod is unavailable); an old pod goes when its new one is available."""
    delete: list[str] = []
    should_not_run: list[str] = []
    allowed: list[str] = []
    candidates: list[str] = []
    num_surge = num_available = 0
    generation = template_generation(ds)
    for name in sorted(node_pods):
        new, old, ok = find_updated_pods_on_node(node_pods[name], hash_, generation)
        if not ok:
            num_surge += 1
            continue
        current = old if old is not None else new
        num_available += current is not None and available(current)
        runs_here = verdicts.get(name, NO_VERDICT)[0]
        if old is None:
            continue
        if new is None and not available(old):
            if runs_here:
                allowed.append(name)
            else:
                delete.append(old["metadata"]["name"])
        elif new is None:
            if not runs_here:
                should_not_run.append(old["metadata"]["name"])
            elif num_surge < max_surge:
                candidates.append(name)
        elif not available(new):
            num_surge += 1
        else:
            delete.append(old["metadata"]["name"])
    # Pods on nodes the set left go only while as many pods as desired stay available elsewhere.
    delete += should_not_run[:max(0, min(num_available - desired, len(should_not_run)))]
    room = min(max(0, max_surge - num_surge), len(candidates))
    return delete, allowed + candidates[:room]


# --- status ---------------------------------------------------------------------------------------------


def calculate_status(ds: Obj, verdicts: dict[str, Verdict], node_pods: dict[str, list[Obj]], hash_: str,
                     now: float) -> Obj:
    """updateDaemonSetStatus's counts: per node that should run the pod, its oldest pod decides ready,
    available and updated; pods on nodes that should not run it are misscheduled."""
    desired = current = misscheduled = ready = updated = available = 0
    generation, min_ready = template_generation(ds), _min_ready(ds)
    for name, (should_run, _) in verdicts.items():
        pods = node_pods.get(name) or []
        if not should_run:
            misscheduled += bool(pods)
            continue
        desired += 1
        if not pods:
            continue
        current += 1
        pod = by_creation_and_phase(pods)[0]
        if podutil.is_pod_ready(pod):
            ready += 1
            available += podutil.is_pod_available(pod, min_ready, now)
        updated += is_pod_updated(pod, hash_, generation)
    return {"currentNumberScheduled": current, "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": desired, "numberReady": ready, "updatedNumberScheduled": updated,
            "numberAvailable": available, "numberUnavailable": desired - available}
