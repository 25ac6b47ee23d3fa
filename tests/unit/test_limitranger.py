"""LimitRanger admission: upstream's plugin/pkg/admission/limitranger/admission_test.go tables, by their names."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelite.apiserver.admission import limitranger

Obj = dict[str, Any]


def compute(cpu: str = "", memory: str = "") -> dict[str, str]:
    """getComputeResourceList."""
    return {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}


def ephemeral(value: str = "") -> dict[str, str]:
    """getLocalStorageResourceList."""
    return {"ephemeral-storage": value} if value else {}


def requirements(requests: dict[str, str], limits: dict[str, str]) -> Obj:
    """getResourceRequirements (empty lists kept out, as they are on the wire)."""
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def create_limit_range(kind: str, min_: dict[str, str] | None = None, max_: dict[str, str] | None = None,
                       default: dict[str, str] | None = None, default_request: dict[str, str] | None = None,
                       ratio: dict[str, str] | None = None) -> Obj:
    """createLimitRange."""
    item = {"type": kind, "min": min_, "max": max_, "default": default, "defaultRequest": default_request,
            "maxLimitRequestRatio": ratio}
    return {"metadata": {"name": "abc", "namespace": "test"},
            "spec": {"limits": [{k: v for k, v in item.items() if v}]}}


def valid_limit_range() -> Obj:
    return {"metadata": {"name": "abc", "namespace": "test"}, "spec": {"limits": [
        {"type": "Pod", "max": compute("200m", "4Gi"), "min": compute("50m", "2Mi")},
        {"type": "Container", "max": compute("100m", "2Gi"), "min": compute("25m", "1Mi"),
         "default": compute("75m", "10Mi"), "defaultRequest": compute("50m", "5Mi")}]}}


def valid_pod(name: str, containers: int, resources: Obj, *init: Obj) -> Obj:
    """validPod, with validPodInit's init containers."""
    spec: Obj = {"containers": [{"name": f"foo-{i}", "image": f"foo:V{i}", "resources": copy.deepcopy(resources)}
                                for i in range(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"foo-{i}", "image": f"foo:V{i}", "resources": copy.deepcopy(r)}
                                  for i, r in enumerate(init)]
    return {"metadata": {"name": name, "namespace": "test"}, "spec": spec}


def test_default_container_resource_requirements() -> None:
    assert limitranger.default_container_resource_requirements(valid_limit_range()) == (
        compute("50m", "5Mi"), compute("75m", "10Mi"))


def test_merge_pod_resource_requirements() -> None:
    requests, limits = limitranger.default_container_resource_requirements(valid_limit_range())
    # pod with no resources enumerated should get each resource from default request
    pod = valid_pod("empty-resources", 1, {})
    limitranger.merge_pod_resource_requirements(pod, requests, limits)
    assert pod["spec"]["containers"][0]["resources"] == {"requests": requests, "limits": limits}
    assert pod["metadata"]["annotations"][limitranger.LIMIT_RANGER_ANNOTATION] == \
        "LimitRanger plugin set: cpu, memory request for container foo-0; cpu, memory limit for container foo-0"
    # pod with some resources enumerated should only merge empty
    given = requirements(compute(memory="512Mi"), {})
    pod = valid_pod("limit-memory", 1, given, given)
    limitranger.merge_pod_resource_requirements(pod, requests, limits)
    expected = {"requests": {"cpu": requests["cpu"], "memory": "512Mi"}, "limits": limits}
    assert pod["spec"]["containers"][0]["resources"] == expected
    assert pod["spec"]["initContainers"][0]["resources"] == expected
    assert pod["metadata"]["annotations"][limitranger.LIMIT_RANGER_ANNOTATION] == (
        "LimitRanger plugin set: cpu request for container foo-0; cpu, memory limit for container foo-0; "
        "cpu request for init container foo-0; cpu, memory limit for init container foo-0")
    # pod with all resources enumerated should not merge anything
    given = requirements(compute("100m", "512Mi"), compute("200m", "1G"))
    init = requirements(compute("200m", "1G"), compute("400m", "2G"))
    pod = valid_pod("limit-memory", 1, given, init)
    limitranger.merge_pod_resource_requirements(pod, requests, limits)
    assert pod["spec"]["containers"][0]["resources"] == given
    assert pod["spec"]["initContainers"][0]["resources"] == init
    assert "annotations" not in pod["metadata"]


def case(pod: Obj, limit_range: Obj) -> Any:
    return pytest.param(pod, limit_range, id=pod["metadata"]["name"])


CTR, POD = "Container", "Pod"
POD_LIMIT_SUCCESS = [
    case(valid_pod("ctr-min-cpu-request", 1, requirements(compute("100m"), {})),
         create_limit_range(CTR, min_=compute("50m"))),
    case(valid_pod("ctr-min-cpu-request-limit", 1, requirements(compute("100m"), compute("200m"))),
         create_limit_range(CTR, min_=compute("50m"))),
    case(valid_pod("ctr-min-memory-request", 1, requirements(compute(memory="60Mi"), {})),
         create_limit_range(CTR, min_=compute(memory="50Mi"))),
    case(valid_pod("ctr-max-cpu-request-limit", 1, requirements(compute("500m"), compute("1"))),
         create_limit_range(CTR, max_=compute("2"))),
    case(valid_pod("ctr-max-cpu-limit", 1, requirements({}, compute("1"))), create_limit_range(CTR, max_=compute("2"))),
    case(valid_pod("ctr-max-mem-request-limit", 1, requirements(compute(memory="250Mi"), compute(memory="500Mi"))),
         create_limit_range(CTR, max_=compute(memory="1Gi"))),
    case(valid_pod("ctr-max-cpu-ratio", 1, requirements(compute("500m"), compute("750m"))),
         create_limit_range(CTR, ratio=compute("1.5"))),
    case(valid_pod("pod-min-cpu-request", 2, requirements(compute("75m"), {})),
         create_limit_range(POD, min_=compute("100m"))),
    case(valid_pod("pod-min-memory-request-limit", 2, requirements(compute(memory="60Mi"), compute(memory="100Mi"))),
         create_limit_range(POD, min_=compute(memory="100Mi"))),
    case(valid_pod("pod-init-min-memory-request", 2, requirements(compute(memory="60Mi"), {}),
                   requirements(compute(memory="100Mi"), {})),
         create_limit_range(POD, min_=compute(memory="100Mi"))),
    case(valid_pod("pod-max-cpu-request-limit", 2, requirements(compute("500m"), compute("1"))),
         create_limit_range(POD, max_=compute("2"))),
    case(valid_pod("pod-init-max-cpu-limit", 2, requirements({}, compute("1")), requirements({}, compute("2")),
                   requirements({}, compute("2"))),
         create_limit_range(POD, max_=compute("2"))),
    case(valid_pod("pod-max-mem-ratio", 3, requirements(compute(memory="300Mi"), compute(memory="450Mi"))),
         create_limit_range(POD, max_=compute(memory="2Gi"), ratio=compute(memory="1.5"))),
    case(valid_pod("ctr-1-min-local-ephemeral-storage-request", 1, requirements(ephemeral("60Mi"), {})),
         create_limit_range(CTR, min_=ephemeral("50Mi"))),
    case(valid_pod("ctr-2-max-local-ephemeral-storage-limit", 2, requirements({}, ephemeral("500Mi"))),
         create_limit_range(CTR, max_=ephemeral("600Mi"))),
    case(valid_pod("pod-max-local-ephemeral-storage-ratio", 3, requirements(ephemeral("300Mi"), ephemeral("450Mi"))),
         create_limit_range(POD, max_=ephemeral("2Gi"), ratio=ephemeral("1.5"))),
]


@pytest.mark.parametrize(("pod", "limit_range"), POD_LIMIT_SUCCESS)
def test_pod_limit_func_success(pod: Obj, limit_range: Obj) -> None:
    """TestPodLimitFunc's successCases: PodMutateLimitFunc, then PodValidateLimitFunc, without error."""
    limitranger.merge_pod_resource_requirements(pod, *limitranger.default_container_resource_requirements(limit_range))
    assert limitranger.pod_validate_limit(limit_range, pod) == []


POD_LIMIT_ERRORS = [
    case(valid_pod("ctr-min-cpu-request", 1, requirements(compute("40m"), {})),
         create_limit_range(CTR, min_=compute("50m"))),
    case(valid_pod("ctr-min-cpu-request-limit", 1, requirements(compute("40m"), compute("200m"))),
         create_limit_range(CTR, min_=compute("50m"))),
    case(valid_pod("ctr-min-cpu-no-request-limit", 1, {}), create_limit_range(CTR, min_=compute("50m"))),
    case(valid_pod("ctr-min-memory-request", 1, requirements(compute(memory="40Mi"), {})),
         create_limit_range(CTR, min_=compute(memory="50Mi"))),
    case(valid_pod("ctr-max-cpu-request-limit", 1, requirements(compute("500m"), compute("2500m"))),
         create_limit_range(CTR, max_=compute("2"))),
    case(valid_pod("ctr-max-cpu-limit", 1, requirements({}, compute("2500m"))),
         create_limit_range(CTR, max_=compute("2"))),
    case(valid_pod("ctr-max-cpu-no-request-limit", 1, {}), create_limit_range(CTR, max_=compute("2"))),
    case(valid_pod("ctr-max-cpu-ratio", 1, requirements(compute("1250m"), compute("2500m"))),
         create_limit_range(CTR, ratio=compute("1"))),
    case(valid_pod("ctr-max-mem-request-limit", 1, requirements(compute(memory="250Mi"), compute(memory="2Gi"))),
         create_limit_range(CTR, max_=compute(memory="1Gi"))),
    case(valid_pod("pod-min-cpu-request", 1, requirements(compute("75m"), {})),
         create_limit_range(POD, min_=compute("100m"))),
    case(valid_pod("pod-min-memory-request-limit", 1, requirements(compute(memory="60Mi"), compute(memory="100Mi"))),
         create_limit_range(POD, min_=compute(memory="100Mi"))),
    case(valid_pod("pod-max-cpu-request-limit", 3, requirements(compute("500m"), compute("1"))),
         create_limit_range(POD, max_=compute("2"))),
    case(valid_pod("pod-max-cpu-limit", 3, requirements({}, compute("1"))), create_limit_range(POD, max_=compute("2"))),
    case(valid_pod("pod-max-mem-request-limit", 3, requirements(compute(memory="250Mi"), compute(memory="500Mi"))),
         create_limit_range(POD, max_=compute(memory="1Gi"))),
]


@pytest.mark.parametrize(("pod", "limit_range"), POD_LIMIT_ERRORS)
def test_pod_limit_func_errors(pod: Obj, limit_range: Obj) -> None:
    """TestPodLimitFunc's errorCases."""
    limitranger.merge_pod_resource_requirements(pod, *limitranger.default_container_resource_requirements(limit_range))
    assert limitranger.pod_validate_limit(limit_range, pod)


@pytest.mark.parametrize(("pod", "item", "message"), [
    pytest.param(valid_pod("p", 1, requirements(compute("500m"), compute("2"))), {"max": compute("1")},
                 "maximum cpu usage per Container is 1, but limit is 2", id="container limit above max"),
    pytest.param(valid_pod("p", 1, requirements(compute("10m", "1Mi"), {})), {"min": compute("50m", "5Mi")},
                 "[minimum cpu usage per Container is 50m, but request is 10m, "
                 "minimum memory usage per Container is 5Mi, but request is 1Mi]", id="aggregate of two"),
    pytest.param(valid_pod("p", 1, requirements(compute("100m"), compute("1"))),
                 {"maxLimitRequestRatio": compute("4")},
                 "cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000", id="ratio"),
])
def test_refusal_messages(pod: Obj, item: Obj, message: str) -> None:
    """Upstream's words, all of one LimitRange's violations in one aggregate (utilerrors.NewAggregate)."""
    limit_range = {"metadata": {"name": "lr", "namespace": "test"}, "spec": {"limits": [{"type": "Container", **item}]}}
    assert limitranger.validate_pod(pod, FixedLimitRanges([limit_range])) == [message]


class FixedLimitRanges:
    """The namespace's LimitRanges as the API server's cache would list them."""

    def __init__(self, limit_ranges: list[Obj]) -> None:
        self.limit_ranges = limit_ranges

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return None

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        assert resource == "limitranges"
        return self.limit_ranges


def test_limit_ranger_admit_pod() -> None:
    """TestLimitRangerAdmitPod: the defaults and the annotation land on the pod, init containers included."""
    pod = valid_pod("pod-init", 1, {}, {})
    limitranger.admit_pod(pod, FixedLimitRanges([valid_limit_range()]))
    assert limitranger.validate_pod(pod, FixedLimitRanges([valid_limit_range()])) == []
    for kind in ("containers", "initContainers"):
        assert pod["spec"][kind][0]["resources"] == {"requests": compute("50m", "5Mi"),
                                                     "limits": compute("75m", "10Mi")}
    assert pod["metadata"]["annotations"][limitranger.LIMIT_RANGER_ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container foo-0; cpu, memory limit for container foo-0; "
        "cpu, memory request for init container foo-0; cpu, memory limit for init container foo-0")


def claim(storage: str) -> Obj:
    return {"metadata": {"name": "c", "namespace": "test"},
            "spec": {"resources": {"requests": {"storage": storage}} if storage else {}}}


@pytest.mark.parametrize(("pvc", "refused"), [
    pytest.param(claim("5Gi"), [], id="pvc-within-limits"),
    pytest.param(claim("500Mi"), ["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"],
                 id="pvc-below-min"),
    pytest.param(claim("20Gi"), ["maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"],
                 id="pvc-above-max"),
])
def test_persistent_volume_claim_limit_func(pvc: Obj, refused: list[str]) -> None:
    """TestPersistentVolumeClaimLimitFunc: min and max bound the requested storage; deleting claims pass."""
    limit_range = create_limit_range("PersistentVolumeClaim", min_={"storage": "1Gi"}, max_={"storage": "10Gi"})
    lookup = FixedLimitRanges([limit_range])
    assert limitranger.validate_claim(pvc, None, lookup) == refused
    deleting = {"metadata": {"name": "c", "namespace": "test", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert limitranger.validate_claim(pvc, deleting, lookup) == []
