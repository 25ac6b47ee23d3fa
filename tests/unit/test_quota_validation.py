"""LimitRange and ResourceQuota validation: upstream's TestValidateLimitRange and TestValidateResourceQuota
(pkg/apis/core/validation), by their case names; as upstream, every error of a failing case must carry its detail."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.api.validation import DNS1123_LABEL_MSG, DNS1123_SUBDOMAIN_MSG
from kubelite.apiserver.registry.quota import (
    LIMIT_RANGES,
    RESOURCE_QUOTAS,
    LimitRangeStrategy,
    ResourceQuotaStrategy,
    default_limit_range,
)

Obj = dict[str, Any]


def resources(cpu: str = "", memory: str = "") -> dict[str, str]:
    """getResourceList."""
    return {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}


def storage(value: str = "") -> dict[str, str]:
    """getStorageResourceList."""
    return {"storage": value} if value else {}


def limit_range(*items: Obj, name: str = "abc", namespace: str = "foo") -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"limits": list(items)}}


def item(kind: str, **fields: dict[str, str]) -> Obj:
    return {"type": kind, **{k: v for k, v in fields.items() if v}}


LIMIT_RANGE_VALID = [
    pytest.param(limit_range(
        item("Pod", max=resources("100m", "10000Mi"), min=resources("5m", "100Mi"),
             maxLimitRequestRatio=resources("10")),
        item("Container", max=resources("100m", "10000Mi"), min=resources("5m", "100Mi"),
             default=resources("50m", "500Mi"), defaultRequest=resources("10m", "200Mi"),
             maxLimitRequestRatio=resources("10")),
        item("PersistentVolumeClaim", max=storage("10Gi"), min=storage("5Gi"))), id="all-fields-valid"),
    pytest.param(limit_range(item("PersistentVolumeClaim", min=storage("5Gi"))), id="pvc-min-only"),
    pytest.param(limit_range(item("PersistentVolumeClaim", max=storage("10Gi"))), id="pvc-max-only"),
    pytest.param(limit_range(item("Container", max=resources("100m", "10000T"), min=resources("5m", "100Mi"),
                                  default=resources("50m", "500Mi"), defaultRequest=resources("10m", "200Mi"),
                                  maxLimitRequestRatio=resources("10"))), id="all-fields-valid-big-numbers"),
    pytest.param(limit_range(item("thirdparty.com/foo", max=resources("100m", "10000T"),
                                  min=resources("5m", "100Mi"), default=resources("50m", "500Mi"),
                                  defaultRequest=resources("10m", "200Mi"), maxLimitRequestRatio=resources("10"))),
                 id="thirdparty-fields-all-valid-standard-container-resources"),
    pytest.param(limit_range(item("thirdparty.com/foo", max=storage("10000T"), min=storage("100Mi"),
                                  default=storage("500Mi"), defaultRequest=storage("200Mi"))),
                 id="thirdparty-fields-all-valid-storage-resources"),
]


@pytest.mark.parametrize("obj", LIMIT_RANGE_VALID)
def test_validate_limit_range_success(obj: Obj) -> None:
    assert LimitRangeStrategy(LIMIT_RANGES).validate(obj) == []


LIMIT_RANGE_INVALID = [
    pytest.param(limit_range(name=""), "name or generateName is required", id="zero-length-name"),
    pytest.param(limit_range(namespace=""), "", id="zero-length-namespace"),
    pytest.param(limit_range(name="^Invalid"), DNS1123_SUBDOMAIN_MSG, id="invalid-name"),
    pytest.param(limit_range(namespace="^Invalid"), DNS1123_LABEL_MSG, id="invalid-namespace"),
    pytest.param(limit_range(item("Pod", max=resources("100m", "10000m"), min=resources("0m", "100m")),
                             item("Pod", min=resources("0m", "100m"))), "", id="duplicate-limit-type"),
    pytest.param(limit_range(item("Pod", max=resources("100m", "10000m"), min=resources("0m", "100m"),
                                  default=resources("10m", "100m"))),
                 "may not be specified when `type` is 'Pod'", id="default-limit-type-pod"),
    pytest.param(limit_range(item("Pod", max=resources("100m", "10000m"), min=resources("0m", "100m"),
                                  defaultRequest=resources("10m", "100m"))),
                 "may not be specified when `type` is 'Pod'", id="default-request-limit-type-pod"),
    pytest.param(limit_range(item("Pod", max=resources("10m"), min=resources("100m"))),
                 "min value 100m is greater than max value 10m", id="min value 100m is greater than max value 10m"),
    pytest.param(limit_range(item("Container", max=resources("1"), min=resources("100m"),
                                  default=resources("2000m"))),
                 "default value 2 is greater than max value 1", id="invalid spec default outside range"),
    pytest.param(limit_range(item("Container", max=resources("1"), min=resources("100m"),
                                  defaultRequest=resources("2000m"))),
                 "default request value 2 is greater than max value 1",
                 id="invalid spec default request outside range"),
    pytest.param(limit_range(item("Container", max=resources("2"), min=resources("100m"),
                                  default=resources("500m"), defaultRequest=resources("800m"))),
                 "default request value 800m is greater than default limit value 500m",
                 id="invalid spec default request more than default"),
    pytest.param(limit_range(item("Pod", maxLimitRequestRatio=resources("800m"))), "ratio 800m is less than 1",
                 id="invalid spec maxLimitRequestRatio less than 1"),
    pytest.param(limit_range(item("Container", max=resources(memory="2Gi"), min=resources(memory="512Mi"),
                                  maxLimitRequestRatio=resources(memory="10"))),
                 "ratio 10 is greater than max/min = 4.000000",
                 id="invalid spec maxLimitRequestRatio greater than max/min"),
    pytest.param(limit_range(item("foo", max=storage("10000T"), min=storage("100Mi"), default=storage("500Mi"),
                                  defaultRequest=storage("200Mi"))),
                 "must be a standard limit type or fully qualified", id="invalid non standard limit type"),
    pytest.param(limit_range(item("PersistentVolumeClaim")),
                 "either minimum or maximum storage value is required, but neither was provided",
                 id="min and max values missing, one required"),
    pytest.param(limit_range(item("PersistentVolumeClaim", min=storage("10Gi"), max=storage("1Gi"))),
                 "min value 10Gi is greater than max value 1Gi", id="invalid min greater than max"),
]


@pytest.mark.parametrize(("obj", "detail"), LIMIT_RANGE_INVALID)
def test_validate_limit_range_errors(obj: Obj, detail: str) -> None:
    causes = LimitRangeStrategy(LIMIT_RANGES).validate(obj)
    assert causes
    assert all(detail in c.message for c in causes), causes


def test_limit_range_container_defaults() -> None:
    """SetDefaults_LimitRangeItem: default limit from max, default request from the default limit, else from min."""
    obj = limit_range(item("Container", max=resources("2", "1Gi"), min=resources("100m"),
                           default=resources(memory="512Mi")),
                      item("Pod", max=resources("4")))
    default_limit_range(obj)
    container, pod = obj["spec"]["limits"]
    assert container["default"] == {"cpu": "2", "memory": "512Mi"}
    assert container["defaultRequest"] == {"cpu": "2", "memory": "512Mi"}
    assert "default" not in pod


def quota(name: str = "abc", namespace: str = "foo", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


SPEC = {"hard": {"cpu": "100", "memory": "10000", "requests.cpu": "100", "requests.memory": "10000",
                 "limits.cpu": "100", "limits.memory": "10000", "pods": "10", "services": "0",
                 "replicationcontrollers": "10", "resourcequotas": "10", "configmaps": "10", "secrets": "10"}}

QUOTA_VALID = [
    pytest.param(quota(**SPEC), id="spec"),
    pytest.param(quota(hard={"cpu": "100m"}), id="fractionalComputeSpec"),
    pytest.param(quota(hard={"cpu": "100", "limits.cpu": "200"}, scopes=["Terminating"]), id="terminatingSpec"),
    pytest.param(quota(hard={"cpu": "100"}, scopes=["NotTerminating"]), id="nonTerminatingSpec"),
    pytest.param(quota(hard={"pods": "100"}, scopes=["BestEffort"]), id="bestEffortSpec"),
    pytest.param(quota(hard={"cpu": "100"}, scopes=["NotBestEffort"]), id="nonBestEffortSpec"),
    pytest.param(quota(hard={"count/deployments.apps": "4", "count/pods": "2", "requests.nvidia.com/gpu": "1"}),
                 id="object counts and extended resources"),
    pytest.param(quota(hard={"pods": "2"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}), id="priority class selector"),
]


@pytest.mark.parametrize("obj", QUOTA_VALID)
def test_validate_resource_quota_success(obj: Obj) -> None:
    assert ResourceQuotaStrategy(RESOURCE_QUOTAS).validate(obj) == []


QUOTA_INVALID = [
    pytest.param(quota(name="", **SPEC), "name or generateName is required", id="zero-length Name"),
    pytest.param(quota(namespace="", **SPEC), "", id="zero-length Namespace"),
    pytest.param(quota(name="^Invalid", **SPEC), DNS1123_SUBDOMAIN_MSG, id="invalid Name"),
    pytest.param(quota(namespace="^Invalid", **SPEC), DNS1123_LABEL_MSG, id="invalid Namespace"),
    pytest.param(quota(hard={"cpu": "-100", "memory": "-10000", "pods": "-10", "services": "-10",
                             "replicationcontrollers": "-10", "resourcequotas": "-10", "configmaps": "-10",
                             "secrets": "-10"}), "must be greater than or equal to 0", id="negative-limits"),
    pytest.param(quota(hard={"pods": ".1", "services": ".5", "replicationcontrollers": "1.25",
                             "resourcequotas": "2.5"}), "must be an integer", id="fractional-api-resource"),
    pytest.param(quota(hard={"storage": "10"}), "must be a standard resource for quota", id="invalid-quota-resource"),
    pytest.param(quota(hard={"cpu": "100"}, scopes=["Terminating", "NotTerminating"]), "conflicting scopes",
                 id="invalid-quota-terminating-pair"),
    pytest.param(quota(hard={"pods": "100"}, scopes=["BestEffort", "NotBestEffort"]), "conflicting scopes",
                 id="invalid-quota-besteffort-pair"),
    pytest.param(quota(hard={"cpu": "100"}, scopes=["foo"]), "unsupported scope", id="invalid-quota-scope-name"),
    # kubelite's cases for the scope rules upstream's table leaves to its other tests
    pytest.param(quota(hard={"cpu": "1"}, scopes=["BestEffort"]), "unsupported scope applied to resource",
                 id="best effort scope on compute resources"),
    pytest.param(quota(hard={"pods": "1"}, scopeSelector={"matchExpressions": [
        {"scopeName": "Terminating", "operator": "In", "values": ["x"]}]}), "must be 'Exist' when scope is any of",
                 id="terminating selector with In"),
    pytest.param(quota(hard={"pods": "1"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In"}]}), "must be at least one value", id="In without values"),
    pytest.param(quota(hard={"pods": "1"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Exists", "values": ["a"]}]}), "must be no value",
                 id="Exists with values"),
]


@pytest.mark.parametrize(("obj", "detail"), QUOTA_INVALID)
def test_validate_resource_quota_errors(obj: Obj, detail: str) -> None:
    causes = ResourceQuotaStrategy(RESOURCE_QUOTAS).validate(obj)
    assert causes
    assert all(detail in c.message for c in causes), causes


def test_resource_quota_scopes_are_immutable() -> None:
    strategy = ResourceQuotaStrategy(RESOURCE_QUOTAS)
    old = quota(hard={"pods": "1"}, scopes=["Terminating"])
    new = quota(hard={"pods": "2"}, scopes=["NotTerminating"])
    assert [(c.field, c.message) for c in strategy.validate_update(new, old)] == [
        ("spec.scopes", 'Invalid value: []string{"NotTerminating"}: field is immutable')]
    assert strategy.validate_update(quota(hard={"pods": "2"}, scopes=["Terminating"]), old) == []


@pytest.mark.parametrize(("name", "valid"), [
    ("memory", True), ("cpu", True), ("storage", True), ("requests.cpu", True), ("requests.memory", True),
    ("requests.storage", True), ("limits.cpu", True), ("limits.memory", True), ("network", False), ("disk", False),
    ("", False), (".", False), ("..", False), ("my.favorite.app.co/12345", True), ("my.favorite.app.co/_12345", False),
    ("my.favorite.app.co/12345_", False), ("kubernetes.io/..", False), ("kubernetes.io/" + "a" * 63, True),
    ("kubernetes.io/" + "a" * 64, False), ("kubernetes.io//", False), ("kubernetes.io", False),
    ("kubernetes.io/will/not/work/", False),
])
def test_validate_resource_names(name: str, valid: bool) -> None:
    """TestValidateResourceNames, through a Container item's max (validateResourceName on storage types)."""
    causes = LimitRangeStrategy(LIMIT_RANGES).validate(limit_range(item("thirdparty.com/foo", max={name: "1"})))
    assert (causes == []) == valid, causes
