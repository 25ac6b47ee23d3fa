"""Environment resolution (kubelite/agent/container.py `environment`), with cases after kubelet's
TestMakeEnvironmentVariables (pkg/kubelet/kubelet_pods_test.go): configMapKeyRef / secretKeyRef (optional
object, optional key), envFrom (prefix, optional, invalid names skipped with upstream's event), precedence."""

from __future__ import annotations

import base64
import socket
from typing import Any

import pytest

from kubelite.agent.container import ConfigError, environment
from tests.unit.volume_fakes import StaticObjects

Obj = dict[str, Any]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


OBJECTS = StaticObjects(
    ("configmap", {"metadata": {"name": "cm", "namespace": "ns"}, "data": {"REPLICAS": "1", "DUPE": "from-cm"}}),
    ("configmap", {"metadata": {"name": "bad-keys", "namespace": "ns"},
                   "data": {"1bad": "x", "good": "y", "a b": "z"}}),
    ("secret", {"metadata": {"name": "sec", "namespace": "ns"},
                "data": {"PASSWORD": b64("hunter2"), "DUPE": b64("s")}}),
    ("secret", {"metadata": {"name": "bad-secret", "namespace": "ns"}, "data": {"-ok": b64("1"), "$no": b64("2")}}),
)
POD: Obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": []}}


def c(*env: Obj, env_from: list[Obj] | None = None) -> Obj:
    container: Obj = {"name": "main", "env": list(env)}
    if env_from is not None:
        container["envFrom"] = env_from
    return container


def key_ref(kind: str, name: str, key: str, optional: bool | None = None) -> Obj:
    ref: Obj = {"name": name, "key": key}
    if optional is not None:
        ref["optional"] = optional
    return {"configMapKeyRef" if kind == "configmap" else "secretKeyRef": ref}


def var(name: str, **source: Any) -> Obj:
    return {"name": name, **source}


RESOLVED = [
    pytest.param(c(var("R", valueFrom=key_ref("configmap", "cm", "REPLICAS"))), {"R": "1"}, id="configmapkeyref"),
    pytest.param(c(var("P", valueFrom=key_ref("secret", "sec", "PASSWORD"))), {"P": "hunter2"}, id="secretkeyref"),
    pytest.param(c(var("R", valueFrom=key_ref("configmap", "nope", "k", True))), {},
                 id="configmapkeyref_missing_optional"),
    pytest.param(c(var("R", valueFrom=key_ref("configmap", "cm", "nokey", True))), {},
                 id="configmapkeyref_missing_key_optional"),
    pytest.param(c(var("P", valueFrom=key_ref("secret", "nope", "k", True))), {}, id="secretkeyref_missing_optional"),
    pytest.param(c(var("P", valueFrom=key_ref("secret", "sec", "nokey", True))), {},
                 id="secretkeyref_missing_key_optional"),
    pytest.param(c(env_from=[{"configMapRef": {"name": "cm"}}]), {"REPLICAS": "1", "DUPE": "from-cm"}, id="configmap"),
    pytest.param(c(env_from=[{"prefix": "p_", "configMapRef": {"name": "cm"}}]),
                 {"p_REPLICAS": "1", "p_DUPE": "from-cm"}, id="configmap with prefix"),
    pytest.param(c(env_from=[{"configMapRef": {"name": "nope", "optional": True}}]), {},
                 id="configmap_missing_optional"),
    pytest.param(c(env_from=[{"secretRef": {"name": "sec"}}]), {"PASSWORD": "hunter2", "DUPE": "s"}, id="secret"),
    pytest.param(c(env_from=[{"secretRef": {"name": "nope", "optional": True}}]), {}, id="secret_missing_optional"),
    pytest.param(c(env_from=[{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "sec"}}]),
                 {"REPLICAS": "1", "DUPE": "s", "PASSWORD": "hunter2"}, id="later envFrom source wins"),
    pytest.param(c(var("DUPE", value="explicit"), env_from=[{"configMapRef": {"name": "cm"}}]),
                 {"REPLICAS": "1", "DUPE": "explicit"}, id="env overrides envFrom"),
    pytest.param(c(var("X", value="$(REPLICAS)-$(PASSWORD)"), env_from=[{"configMapRef": {"name": "cm"}}]),
                 {"REPLICAS": "1", "DUPE": "from-cm", "X": "1-$(PASSWORD)"}, id="expansion sees envFrom values"),
    pytest.param(c(env_from=[{"configMapRef": {"name": "bad-keys"}}]), {"good": "y"}, id="configmap_invalid_keys"),
    pytest.param(c(env_from=[{"prefix": "p_", "configMapRef": {"name": "bad-keys"}}]),
                 {"p_1bad": "x", "p_good": "y"}, id="configmap_invalid_keys_valid (a prefix makes 1bad valid)"),
    pytest.param(c(env_from=[{"secretRef": {"name": "bad-secret"}}]), {"-ok": "1"}, id="secret_invalid_keys"),
]


@pytest.mark.parametrize("container,want", RESOLVED)
def test_resolved(container: Obj, want: dict[str, str]) -> None:
    assert environment(POD, container, "10.0.0.1", {}, {}, OBJECTS.get) == {"HOSTNAME": "p", **want}


def _named(name: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": "u"}, "spec": {"containers": [], **spec}}


# containerd's TestHostname (internal/cri/server/container_create_linux_test.go) and kubelet's
# TestTruncatePodHostname (pkg/kubelet/kubelet_pods_test.go), plus the user's env taking precedence.
HOSTNAMES = [
    pytest.param(_named("p", hostname="test-hostname"), c(), "test-hostname",
                 id="should add HOSTNAME=sandbox.Hostname for pod network namespace"),
    pytest.param(_named("db-0"), c(), "db-0", id="the pod's name when spec.hostname is not set"),
    pytest.param(_named("p", hostNetwork=True, hostname="test-hostname"), c(), socket.gethostname(),
                 id="should add HOSTNAME=os.Hostname for host network namespace if sandbox.Hostname is not set"),
    pytest.param(_named("test.pod.hostname"), c(), "test.pod.hostname", id="valid hostname"),
    pytest.param(_named("1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567"), c(),
                 "1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567", id="too long hostname"),
    pytest.param(_named("1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456-1234567"), c(),
                 "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456", id="hostname end with -"),
    pytest.param(_named("1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456.1234567"), c(),
                 "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456", id="hostname end with ."),
    pytest.param(_named("p"), c(var("HOSTNAME", value="mine")), "mine", id="the container's env overrides HOSTNAME"),
]


@pytest.mark.parametrize("pod,container,hostname", HOSTNAMES)
def test_hostname(pod: Obj, container: Obj, hostname: str) -> None:
    assert environment(pod, container, "10.0.0.1", {}, {}, OBJECTS.get)["HOSTNAME"] == hostname


FAILS = [
    pytest.param(c(var("R", valueFrom=key_ref("configmap", "nope", "k"))), 'configmap "nope" not found',
                 id="configmapkeyref_missing"),
    pytest.param(c(var("R", valueFrom=key_ref("configmap", "cm", "nokey"))),
                 "couldn't find key nokey in ConfigMap ns/cm", id="configmapkeyref_missing_key"),
    pytest.param(c(var("P", valueFrom=key_ref("secret", "nope", "k", False))), 'secret "nope" not found',
                 id="secretkeyref_missing"),
    pytest.param(c(var("P", valueFrom=key_ref("secret", "sec", "nokey"))), "couldn't find key nokey in Secret ns/sec",
                 id="secretkeyref_missing_key"),
    pytest.param(c(env_from=[{"configMapRef": {"name": "nope"}}]), 'configmap "nope" not found',
                 id="configmap_missing"),
    pytest.param(c(env_from=[{"secretRef": {"name": "nope"}}]), 'secret "nope" not found', id="secret_missing"),
]


@pytest.mark.parametrize("container,message", FAILS)
def test_missing_is_a_config_error(container: Obj, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        environment(POD, container, "10.0.0.1", {}, {}, OBJECTS.get)
    assert str(err.value) == message


WARNINGS = [
    pytest.param([{"configMapRef": {"name": "bad-keys"}}],
                 "Keys [1bad, a b] from the EnvFrom configMap ns/bad-keys were skipped since they are considered "
                 "invalid environment variable names.", id="configmap_invalid_keys"),
    pytest.param([{"secretRef": {"name": "bad-secret"}}],
                 "Keys [$no] from the EnvFrom secret ns/bad-secret were skipped since they are considered invalid "
                 "environment variable names.", id="secret_invalid_keys"),
]


@pytest.mark.parametrize("env_from,message", WARNINGS)
def test_invalid_names_are_reported(env_from: list[Obj], message: str) -> None:
    seen: list[tuple[str, str]] = []
    environment(POD, c(env_from=env_from), "10.0.0.1", {}, {}, OBJECTS.get, lambda r, m: seen.append((r, m)))
    assert seen == [("InvalidEnvironmentVariableNames", message)]


def test_without_an_object_source_references_fail_as_unsynced() -> None:
    with pytest.raises(ConfigError, match="failed to sync configmap cache"):
        environment(POD, c(var("R", valueFrom=key_ref("configmap", "cm", "REPLICAS"))), "10.0.0.1", {}, {})
