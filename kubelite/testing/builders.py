"""Wire-object builders with upstream's st.MakePod() vocabulary in snake_case.

`make_pod("p").req(cpu="500m").priority(10).node("n1").obj()` returns a plain dict, so
tests port upstream tables mechanically and exercise the same wire format as clients.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._pod: Obj = {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": namespace},
                          "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}

    @property
    def _spec(self) -> Obj:
        spec: Obj = self._pod["spec"]
        return spec

    def namespace(self, ns: str) -> PodBuilder:
        self._pod["metadata"]["namespace"] = ns
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod["metadata"].setdefault("labels", {})[key] = value
        return self

    def finalizer(self, name: str) -> PodBuilder:
        self._pod["metadata"].setdefault("finalizers", []).append(name)
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        return self

    def priority_class(self, name: str) -> PodBuilder:
        self._spec["priorityClassName"] = name
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def req(self, **resources: str) -> PodBuilder:
        self._spec["containers"][0].setdefault("resources", {}).setdefault("requests", {}).update(resources)
        return self

    def lim(self, **resources: str) -> PodBuilder:
        self._spec["containers"][0].setdefault("resources", {}).setdefault("limits", {}).update(resources)
        return self

    def container(self, name: str, image: str = "busybox", **fields: Any) -> PodBuilder:
        self._spec["containers"].append({"name": name, "image": image, **fields})
        return self

    def init_container(self, name: str, image: str = "busybox", **fields: Any) -> PodBuilder:
        self._spec.setdefault("initContainers", []).append({"name": name, "image": image, **fields})
        return self

    def grace(self, seconds: int) -> PodBuilder:
        self._spec["terminationGracePeriodSeconds"] = seconds
        return self

    def scheduling_gates(self, *names: str) -> PodBuilder:
        self._spec["schedulingGates"] = [{"name": n} for n in names]
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._pod.setdefault("status", {})["phase"] = phase
        return self

    def spec(self, **fields: Any) -> PodBuilder:
        self._spec.update(fields)
        return self

    def obj(self) -> Obj:
        return copy.deepcopy(self._pod)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str, cpu: str = "4", memory: str = "32Gi", pods: str = "110",
              labels: dict[str, str] | None = None) -> Obj:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]}}
