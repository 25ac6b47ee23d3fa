"""Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for.

Columns and cells follow pkg/printers/internalversion/printers.go (v1.32); the server
always includes the wide (priority 1) columns and kubectl hides them without `-o wide`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubelite.api.quota import quantity
from kubelite.api.selectors import format_selector
from kubelite.clock import parse_rfc3339

log = logging.getLogger("kubelite.apiserver.tables")

Obj = dict[str, Any]
Cells = list[Any]
Column = tuple[str, str, int]  # name, type, priority


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def since(ts: str | None, now: float) -> str:
    if not ts:
        return "<unknown>"
    return human_duration(now - parse_rfc3339(ts))


def _age(obj: Obj, now: float) -> str:
    return since(obj["metadata"].get("creationTimestamp"), now)


# --- pods ----------------------------------------------------------------------------------------

def _restartable(c: Obj | None) -> bool:
    return bool(c) and c.get("restartPolicy") == "Always"  # type: ignore[union-attr]


def _terminated_reason(term: Obj, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _pod_cells(pod: Obj, now: float) -> Cells:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    conditions = status.get("conditions") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs.values() if _restartable(c))
    ready = 0
    restarts = sidecar_restarts = 0
    last_restart = sidecar_last = ""
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
        reason = "SchedulingGated"
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount", 0)
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
        last_restart = max(last_restart, finished)
        sidecar = _restartable(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += cs.get("restartCount", 0)
            sidecar_last = max(sidecar_last, finished)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, sidecar_last
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount", 0)
            finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
            last_restart = max(last_restart, finished)
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None:
                reason = _terminated_reason(term)
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            has_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if has_ready else "NotReady"
    if pod["metadata"].get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_str = str(restarts)
    if restarts and last_restart:
        restarts_str = f"{restarts} ({since(last_restart, now)} ago)"
    pod_ips = status.get("podIPs") or []
    ip = (pod_ips[0].get("ip") if pod_ips else "") or status.get("podIP") or "<none>"
    gates = spec.get("readinessGates") or []
    gate_str = "<none>"
    if gates:
        true = sum(1 for g in gates for c in conditions
                   if c.get("type") == g.get("conditionType") and c.get("status") == "True")
        gate_str = f"{true}/{len(gates)}"
    return [pod["metadata"]["name"], f"{ready}/{total}", reason, restarts_str, _age(pod, now), ip,
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", gate_str]


def _pod_row_conditions(pod: Obj) -> list[Obj] | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed "
                                                                                          "successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


# --- other kinds ---------------------------------------------------------------------------------

def _node_cells(node: Obj, now: float) -> Cells:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Unknown"
    if ready is not None:
        state = {"True": "Ready", "False": "NotReady"}.get(ready.get("status", ""), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k)
    if labels.get("kubernetes.io/role"):
        roles.append(labels["kubernetes.io/role"])
    addrs = status.get("addresses") or []
    info = status.get("nodeInfo") or {}

    def addr(kind: str) -> str:
        return next((a.get("address", "") for a in addrs if a.get("type") == kind), "<none>")

    return [node["metadata"]["name"], state, ",".join(roles) or "<none>", _age(node, now),
            info.get("kubeletVersion", ""), addr("InternalIP"), addr("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _event_cells(ev: Obj, now: float) -> Cells:
    last = ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
    first = ev.get("firstTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
    inv = ev.get("involvedObject") or {}
    source = (ev.get("source") or {}).get("component") or ev.get("reportingComponent") or ""
    host = (ev.get("source") or {}).get("host")
    if host:
        source = f"{source}, {host}"
    return [since(last, now), ev.get("type", ""), ev.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}", ev.get("message", ""),
            inv.get("fieldPath", ""), source, since(first, now), ev.get("count", 1), ev["metadata"]["name"]]


def _int_or_na(value: Any) -> Any:
    return "N/A" if value is None else value


def _pdb_cells(pdb: Obj, now: float) -> Cells:
    spec = pdb.get("spec") or {}
    return [pdb["metadata"]["name"], _int_or_na(spec.get("minAvailable")), _int_or_na(spec.get("maxUnavailable")),
            (pdb.get("status") or {}).get("disruptionsAllowed", 0), _age(pdb, now)]


def _pc_cells(pc: Obj, now: float) -> Cells:
    return [pc["metadata"]["name"], pc.get("value", 0), bool(pc.get("globalDefault", False)), _age(pc, now),
            pc.get("preemptionPolicy", "")]


_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _modes(spec: Obj) -> str:
    return ",".join(_MODES.get(m, m) for m in spec.get("accessModes") or [])


def _pv_cells(pv: Obj, now: float) -> Cells:
    spec, status = pv.get("spec") or {}, pv.get("status") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""
    return [pv["metadata"]["name"], (spec.get("capacity") or {}).get("storage", ""), _modes(spec),
            spec.get("persistentVolumeReclaimPolicy", ""), status.get("phase", ""), claim,
            spec.get("storageClassName", ""), spec.get("volumeAttributesClassName") or "<unset>",
            status.get("reason", ""), _age(pv, now), spec.get("volumeMode", "")]


def _pvc_cells(pvc: Obj, now: float) -> Cells:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    return [pvc["metadata"]["name"], status.get("phase", ""), spec.get("volumeName", ""),
            (status.get("capacity") or {}).get("storage", ""), _modes(status), spec.get("storageClassName", ""),
            spec.get("volumeAttributesClassName") or "<unset>", _age(pvc, now), spec.get("volumeMode", "")]


def _sc_cells(sc: Obj, now: float) -> Cells:
    name = sc["metadata"]["name"]
    annotations = sc["metadata"].get("annotations") or {}
    if "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                  annotations.get("storageclass.beta.kubernetes.io/is-default-class")):
        name += " (default)"
    return [name, sc.get("provisioner", ""), sc.get("reclaimPolicy", "Delete"),
            sc.get("volumeBindingMode", "Immediate"), bool(sc.get("allowVolumeExpansion", False)), _age(sc, now)]


def _va_cells(va: Obj, now: float) -> Cells:
    spec = va.get("spec") or {}
    return [va["metadata"]["name"], spec.get("attacher", ""), (spec.get("source") or {}).get("persistentVolumeName",
                                                                                              ""),
            spec.get("nodeName", ""), bool((va.get("status") or {}).get("attached", False)), _age(va, now)]


def _fence_cells(fence: Obj, now: float) -> Cells:
    """kubelite's NodeFence (kubelite/apiserver/registry/fencing.py): node, phase, attempts, agent, message."""
    status = fence.get("status") or {}
    return [fence["metadata"]["name"], (fence.get("spec") or {}).get("nodeName", ""), status.get("phase", ""),
            int(status.get("attempts") or 0), status.get("agent", ""), _age(fence, now), status.get("message", "")]


def _ns_cells(ns: Obj, now: float) -> Cells:
    return [ns["metadata"]["name"], (ns.get("status") or {}).get("phase", ""), _age(ns, now)]


def _lease_cells(lease: Obj, now: float) -> Cells:
    return [lease["metadata"]["name"], (lease.get("spec") or {}).get("holderIdentity", ""), _age(lease, now)]


def _service_account_cells(sa: Obj, now: float) -> Cells:
    return [sa["metadata"]["name"], len(sa.get("secrets") or []), _age(sa, now)]


def _config_map_cells(cm: Obj, now: float) -> Cells:
    return [cm["metadata"]["name"], len(cm.get("data") or {}) + len(cm.get("binaryData") or {}), _age(cm, now)]


def _secret_cells(secret: Obj, now: float) -> Cells:
    return [secret["metadata"]["name"], secret.get("type", ""), len(secret.get("data") or {}), _age(secret, now)]


def _quota_cells(rq: Obj, now: float) -> Cells:
    """printResourceQuota: `name: used/hard` pairs, sorted; `limits.*` in LIMIT, the rest in REQUEST."""
    status = rq.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    columns: dict[bool, list[str]] = {True: [], False: []}
    for name in sorted(hard):
        columns[name.split(".")[0] == "limits" and "." in name].append(
            f"{name}: {quantity(used.get(name, '0'))}/{quantity(hard[name])}")
    return [rq["metadata"]["name"], _age(rq, now), ", ".join(columns[False]), ", ".join(columns[True])]


def _template(obj: Obj) -> tuple[str, str, str]:
    spec = obj.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = spec.get("selector") or {}
    sel = ",".join(f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items())
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers), sel


def _sts_cells(sts: Obj, now: float) -> Cells:
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    containers, images, _ = _template(sts)
    return [sts["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", _age(sts, now),
            containers, images]


def _rs_cells(rs: Obj, now: float) -> Cells:
    spec, status = rs.get("spec") or {}, rs.get("status") or {}
    containers, images, sel = _template(rs)
    return [rs["metadata"]["name"], spec.get("replicas", 1), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(rs, now), containers, images, sel]


def _rc_cells(rc: Obj, now: float) -> Cells:
    """printReplicationController: a ReplicaSet's columns, the selector a plain label map (labels.FormatLabels)."""
    selector = (rc.get("spec") or {}).get("selector")
    shown = ",".join(f"{k}={v}" for k, v in sorted(selector.items())) if isinstance(selector, dict) else ""
    return [*_rs_cells(rc, now)[:-1], shown or "<none>"]


def _deploy_cells(d: Obj, now: float) -> Cells:
    spec, status = d.get("spec") or {}, d.get("status") or {}
    containers, images, sel = _template(d)
    return [d["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(d, now), containers, images,
            sel]


def _hpa_metric(spec: Obj, status: Obj | None) -> str:
    """One metric of formatHPAMetrics: `current/target` ("<unknown>" before the controller measured it), resource
    metrics prefixed by their resource's name, averages of Object and External metrics marked `(avg)`."""
    kind = spec.get("type")
    field = {"External": "external", "Pods": "pods", "Object": "object", "Resource": "resource",
             "ContainerResource": "containerResource"}.get(kind or "")
    if field is None:
        return "<unknown type>"
    source, current = spec.get(field) or {}, ((status or {}).get(field) or {}).get("current") if status else None
    target = source.get("target") or {}
    if kind in ("Resource", "ContainerResource"):
        if target.get("averageValue") is not None:
            shown = (current or {}).get("averageValue") if current is not None else None
            return f"{source.get('name', '')}: {shown or '<unknown>'}/{target['averageValue']}"
        utilization = (current or {}).get("averageUtilization")
        wanted = target.get("averageUtilization")
        return (f"{source.get('name', '')}: {'<unknown>' if utilization is None else f'{utilization}%'}/"
                f"{'<auto>' if wanted is None else f'{wanted}%'}")
    if kind == "Pods":
        return f"{(current or {}).get('averageValue') or '<unknown>'}/{target.get('averageValue')}"
    if target.get("averageValue") is not None:  # Object, External
        return f"{(current or {}).get('averageValue') or '<unknown>'}/{target['averageValue']} (avg)"
    return f"{(current or {}).get('value') or '<unknown>'}/{target.get('value')}"


def _hpa_cells(hpa: Obj, now: float) -> Cells:
    """printHorizontalPodAutoscaler: the target as Kind/name, formatHPAMetrics (two metrics, then "+ N more...")."""
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    metrics, current = spec.get("metrics") or [], status.get("currentMetrics") or []
    shown = [_hpa_metric(m, current[i] if i < len(current) else None) for i, m in enumerate(metrics)]
    targets = ", ".join(shown[:2]) + (f" + {len(shown) - 2} more..." if len(shown) > 2 else "") if shown else "<none>"
    low = spec.get("minReplicas")
    return [hpa["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", targets,
            "<unset>" if low is None else str(low), spec.get("maxReplicas", 0), status.get("currentReplicas", 0),
            _age(hpa, now)]


def _ds_cells(ds: Obj, now: float) -> Cells:
    """printDaemonSet: the status counts and the template's nodeSelector (labels.FormatLabels: sorted)."""
    status = ds.get("status") or {}
    containers, images, sel = _template(ds)
    node_selector = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector") or {}
    return [ds["metadata"]["name"], *(status.get(k, 0) for k in (
        "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",
        "numberAvailable")), ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or "<none>",
        _age(ds, now), containers, images, sel]


def _job_cells(job: Obj, now: float) -> Cells:
    """printJob: the first of Complete, Failed, Terminating, Suspended, FailureTarget, SuccessCriteriaMet, Running."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    state = next((s for s in ("Complete", "Failed") if s in true), "")
    if not state and job["metadata"].get("deletionTimestamp"):
        state = "Terminating"
    state = state or next((s for s in ("Suspended", "FailureTarget", "SuccessCriteriaMet") if s in true), "Running")
    succeeded, completions = status.get("succeeded", 0), spec.get("completions")
    parallelism = spec.get("parallelism", 1)
    if completions is not None:
        done = f"{succeeded}/{completions}"
    else:
        done = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    duration = ""
    if status.get("startTime"):
        end = parse_rfc3339(status["completionTime"]) if status.get("completionTime") else now
        duration = human_duration(end - parse_rfc3339(status["startTime"]))
    containers, images, sel = _template(job)
    return [job["metadata"]["name"], state, done, duration, _age(job, now), containers, images, sel]


def _cronjob_cells(cj: Obj, now: float) -> Cells:
    """printCronJob: TIMEZONE and LAST SCHEDULE `<none>` when unset, SUSPEND as printBoolPtr."""
    spec, status = cj.get("spec") or {}, cj.get("status") or {}
    suspend = spec.get("suspend")
    last = status.get("lastScheduleTime")
    containers, images, sel = _template(spec.get("jobTemplate") or {})
    return [cj["metadata"]["name"], spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            "<unset>" if suspend is None else str(bool(suspend)), len(status.get("active") or []),
            since(last, now) if last else "<none>", _age(cj, now), containers, images, sel or "<none>"]


def _revision_cells(rev: Obj, now: float) -> Cells:
    owner = next((r for r in rev["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    controller = ""
    if owner is not None:
        group = owner.get("apiVersion", "").partition("/")[0] if "/" in owner.get("apiVersion", "") else ""
        controller = f"{owner.get('kind', '').lower()}{'.' + group if group else ''}/{owner.get('name', '')}"
    return [rev["metadata"]["name"], controller, rev.get("revision", 0), _age(rev, now)]


def _listed(items: list[str], empty: str) -> str:
    """formatEndpoints / formatDiscoveryEndpoints: at most three, then " + N more..."."""
    if not items:
        return empty
    shown = ",".join(items[:3])
    return shown + (f" + {len(items) - 3} more..." if len(items) > 3 else "")


def _svc_external_ip(spec: Obj, status: Obj) -> str:
    external = list(spec.get("externalIPs") or [])
    kind = spec.get("type", "ClusterIP")
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname", "") for i in (status.get("loadBalancer") or {}).get("ingress")
                   or []]
        return ",".join(ingress + external) or "<pending>"
    return ",".join(external) or "<none>"


def _svc_cells(svc: Obj, now: float) -> Cells:
    spec, status = svc.get("spec") or {}, svc.get("status") or {}
    ports = [f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
             else f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []]
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [svc["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>",
            _svc_external_ip(spec, status), ",".join(ports) or "<none>", _age(svc, now), selector]


def _slice_cells(es: Obj, now: float) -> Cells:
    ports = [str(p["port"]) if p.get("port") is not None else "<unset>" for p in es.get("ports") or []]
    addresses = [a for ep in es.get("endpoints") or [] for a in ep.get("addresses") or []]
    return [es["metadata"]["name"], es.get("addressType", ""), ",".join(ports) or "<unset>",
            _listed(addresses, "<unset>"), _age(es, now)]


def _endpoints_cells(ep: Obj, now: float) -> Cells:
    pairs = []
    for subset in ep.get("subsets") or []:
        ports = subset.get("ports") or []
        for address in subset.get("addresses") or []:
            pairs += [f"{address.get('ip')}:{p.get('port')}" for p in ports] if ports else [str(address.get("ip"))]
    return [ep["metadata"]["name"], _listed(pairs, "<none>"), _age(ep, now)]


def _csr_condition(csr: Obj) -> str:
    """extractCSRStatus: Denied over Approved over Pending, then ",Failed" and ",Issued"."""
    kinds = {c.get("type") for c in (csr.get("status") or {}).get("conditions") or []}
    status = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    if "Failed" in kinds:
        status += ",Failed"
    if (csr.get("status") or {}).get("certificate"):
        status += ",Issued"
    return status


def _csr_cells(csr: Obj, now: float) -> Cells:
    spec = csr.get("spec") or {}
    expiration = spec.get("expirationSeconds")
    return [csr["metadata"]["name"], _age(csr, now), spec.get("signerName") or "<none>", spec.get("username", ""),
            "<none>" if expiration is None else human_duration(expiration), _csr_condition(csr)]


LOAD_BALANCER_WIDTH = 16  # printers.go's loadBalancerWidth: an address column cut to 13 characters and "..."


def _ingress_cells(ing: Obj, now: float) -> Cells:
    """printIngress: the class, up to three rule hosts ("*" for none), the load balancer's addresses, 80 (and 443
    with TLS)."""
    spec, status = ing.get("spec") or {}, ing.get("status") or {}
    rules, more = spec.get("rules") or [], False
    hosts: list[str] = []
    for rule in rules:  # formatHosts: the first three hosts; "more" once a rule follows them
        more = more or len(hosts) == 3
        if not more and isinstance(rule, dict) and rule.get("host"):
            hosts.append(rule["host"])
    shown = (",".join(hosts) + (f" + {len(rules) - 3} more..." if more else "")) if hosts else "*"
    lb = (status.get("loadBalancer") or {}).get("ingress") or []
    address = ",".join(e.get("ip") or e.get("hostname") or "" for e in lb if isinstance(e, dict))
    if len(address) > LOAD_BALANCER_WIDTH:
        address = address[:13] + "..."
    return [ing["metadata"]["name"], spec.get("ingressClassName") or "<none>", shown, address,
            "80, 443" if spec.get("tls") else "80", _age(ing, now)]


def _ingress_class_cells(ic: Obj, now: float) -> Cells:
    """printIngressClass: the controller and its parameters as Kind.group/name."""
    spec = ic.get("spec") or {}
    params = spec.get("parameters")
    shown = "<none>"
    if isinstance(params, dict):
        shown = params.get("kind", "") + (f".{params['apiGroup']}" if params.get("apiGroup") else "") + \
            f"/{params.get('name', '')}"
    return [ic["metadata"]["name"], spec.get("controller", ""), shown, _age(ic, now)]


def _network_policy_cells(np: Obj, now: float) -> Cells:
    """printNetworkPolicy: the pod selector as metav1.FormatLabelSelector writes it."""
    return [np["metadata"]["name"], format_selector((np.get("spec") or {}).get("podSelector")) or "<none>",
            _age(np, now)]


def _default_cells(obj: Obj, now: float) -> Cells:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp", "")]


def _cols(*specs: str) -> list[Column]:
    """`"Name"` is a priority-0 string column; `"+IP"` is wide-only; `"Value:integer"` sets the type."""
    out = []
    for s in specs:
        priority = 1 if s.startswith("+") else 0
        name, _, typ = s.lstrip("+").partition(":")
        out.append((name, typ or "string", priority))
    return out


Printer = tuple[list[Column], Callable[[Obj, float], Cells]]
PRINTERS: dict[str, Printer] = {
    "Pod": (_cols("Name", "Ready", "Status", "Restarts", "Age", "+IP", "+Node", "+Nominated Node",
                  "+Readiness Gates"), _pod_cells),
    "Node": (_cols("Name", "Status", "Roles", "Age", "Version", "+Internal-IP", "+External-IP", "+OS-Image",
                   "+Kernel-Version", "+Container-Runtime"), _node_cells),
    "Event": (_cols("Last Seen", "Type", "Reason", "Object", "Message", "+Subobject", "+Source", "+First Seen",
                    "+Count:integer", "+Name"), _event_cells),
    "PodDisruptionBudget": (_cols("Name", "Min Available", "Max Unavailable", "Allowed Disruptions:integer", "Age"),
                            _pdb_cells),
    "PriorityClass": (_cols("Name", "Value:integer", "Global-Default:boolean", "Age", "PreemptionPolicy"),
                      _pc_cells),
    "PersistentVolume": (_cols("Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim",
                               "StorageClass", "VolumeAttributesClass", "Reason", "Age", "+VolumeMode"), _pv_cells),
    "PersistentVolumeClaim": (_cols("Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass",
                                    "VolumeAttributesClass", "Age", "+VolumeMode"), _pvc_cells),
    "StorageClass": (_cols("Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode",
                           "AllowVolumeExpansion:boolean", "Age"), _sc_cells),
    "VolumeAttachment": (_cols("Name", "Attacher", "PV", "Node", "Attached:boolean", "Age"), _va_cells),
    "Namespace": (_cols("Name", "Status", "Age"), _ns_cells),
    "Lease": (_cols("Name", "Holder", "Age"), _lease_cells),
    "ServiceAccount": (_cols("Name", "Secrets:integer", "Age"), _service_account_cells),
    "ConfigMap": (_cols("Name", "Data:integer", "Age"), _config_map_cells),
    "Secret": (_cols("Name", "Type", "Data:integer", "Age"), _secret_cells),
    "ResourceQuota": (_cols("Name", "Age", "Request", "Limit"), _quota_cells),
    "StatefulSet": (_cols("Name", "Ready", "Age", "+Containers", "+Images"), _sts_cells),
    "ReplicaSet": (_cols("Name", "Desired:integer", "Current:integer", "Ready:integer", "Age", "+Containers",
                         "+Images", "+Selector"), _rs_cells),
    "ReplicationController": (_cols("Name", "Desired:integer", "Current:integer", "Ready:integer", "Age",
                                    "+Containers", "+Images", "+Selector"), _rc_cells),
    "Deployment": (_cols("Name", "Ready", "Up-to-date:integer", "Available:integer", "Age", "+Containers",
                         "+Images", "+Selector"), _deploy_cells),
    "DaemonSet": (_cols("Name", "Desired:integer", "Current:integer", "Ready:integer", "Up-to-date:integer",
                        "Available:integer", "Node Selector", "Age", "+Containers", "+Images", "+Selector"),
                  _ds_cells),
    "ControllerRevision": (_cols("Name", "Controller", "Revision:integer", "Age"), _revision_cells),
    "Job": (_cols("Name", "Status", "Completions", "Duration", "Age", "+Containers", "+Images", "+Selector"),
            _job_cells),
    "CronJob": (_cols("Name", "Schedule", "Timezone", "Suspend:boolean", "Active:integer", "Last Schedule", "Age",
                      "+Containers", "+Images", "+Selector"), _cronjob_cells),
    "Service": (_cols("Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "+Selector"), _svc_cells),
    "EndpointSlice": (_cols("Name", "AddressType", "Ports", "Endpoints", "Age"), _slice_cells),
    "Endpoints": (_cols("Name", "Endpoints", "Age"), _endpoints_cells),
    "CertificateSigningRequest": (_cols("Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"),
                                  _csr_cells),
    "HorizontalPodAutoscaler": (_cols("Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"),
                                _hpa_cells),  # printers.go declares them all strings; the counts are int64 cells
    "NodeFence": (_cols("Name", "Node", "Phase", "Attempts:integer", "Agent", "Age", "+Message"), _fence_cells),
    "Ingress": (_cols("Name", "Class", "Hosts", "Address", "Ports", "Age"), _ingress_cells),
    "IngressClass": (_cols("Name", "Controller", "Parameters", "Age"), _ingress_class_cells),
    "NetworkPolicy": (_cols("Name", "Pod-Selector", "Age"), _network_policy_cells),
}
_DEFAULT: Printer = ([("Name", "string", 0), ("Created At", "date", 0)], _default_cells)


def column_definitions(kind: str, printer: Printer | None = None) -> list[Obj]:
    columns, _ = printer or PRINTERS.get(kind, _DEFAULT)
    return [{"name": name, "type": typ, "format": "name" if name == "Name" else "", "description": name,
             "priority": priority} for name, typ, priority in columns]


def partial_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def row(kind: str, obj: Obj, now: float, include: str, printer: Printer | None = None) -> Obj:
    """One object's row; an object its printer cannot read still gets a row (name, then `<unknown>`), logged,
    so that one stored object never fails a whole `kubectl get`. `printer`: a custom resource's, else the kind's."""
    columns, cells_fn = printer or PRINTERS.get(kind, _DEFAULT)
    try:
        out: Obj = {"cells": cells_fn(obj, now)}
        conditions = _pod_row_conditions(obj) if kind == "Pod" and printer is None else None
    except Exception:
        meta: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        log.exception("cannot print %s %s/%s; showing what is available", kind, meta.get("namespace", ""),
                      meta.get("name", ""))
        out, conditions = {"cells": [meta.get("name", "<unknown>")] + ["<unknown>"] * (len(columns) - 1)}, None
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        out["object"] = partial_metadata(obj)
    if conditions:
        out["conditions"] = conditions
    return out


def list_meta(resource_version: str, continue_token: str = "", remaining: int | None = None) -> Obj:
    """A list's ListMeta (a Table's too): `remaining` is remainingItemCount, given with a continue token."""
    meta: Obj = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return meta


def table(kind: str, objs: list[Obj], now: float, include: str, resource_version: str,
          continue_token: str = "", headers: bool = True, remaining: int | None = None,
          printer: Printer | None = None) -> Obj:
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta(resource_version, continue_token, remaining)}
    if headers:
        out["columnDefinitions"] = column_definitions(kind, printer)
    out["rows"] = [row(kind, o, now, include, printer) for o in objs]
    return out
