"""ValidateEnv and ValidateEnvFrom (pkg/apis/core/validation), cases named as in upstream's TestValidateEnv and
TestValidateEnvFrom where they have one: a pod whose variables cannot be set is refused at create (422), not met
by the agent when it starts the container. Names are checked as 1.32 does by default
(RelaxedEnvironmentVariableValidation: printable ASCII other than '=')."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.apiserver.registry.pods import validate_pod_spec
from kubelite.clock import RealClock
from kubelite.store.memory import MemoryStore

Obj = dict[str, Any]
PATH = "spec.containers[0]"


def _errors(env: list[Any] | None = None, env_from: list[Any] | None = None) -> list[tuple[str, str]]:
    container: Obj = {"name": "c", "image": "i"}
    if env is not None:
        container["env"] = env
    if env_from is not None:
        container["envFrom"] = env_from
    return [(c.field, c.message) for c in validate_pod_spec({"containers": [container]})
            if ".env" in c.field]


CM_REF = {"name": "some-config-map", "key": "some-key"}

ENV_CASES = [
    pytest.param([{"name": "abc", "value": "value"}, {"name": "ABC"}, {"name": "AbC_123"}, {"name": "1bad-since-1.32"},
                  {"name": "a.b", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                  {"name": "c", "valueFrom": {"configMapKeyRef": CM_REF}},
                  {"name": "s", "valueFrom": {"secretKeyRef": {"name": "some-secret", "key": "k"}}},
                  {"name": "r", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}], [],
                 id="success cases (relaxed names: a leading digit is valid in 1.32)"),
    pytest.param([{"name": ""}], [("spec.containers[0].env[0].name", "Required value")], id="zero-length name"),
    pytest.param([{"name": "a=b"}], [("spec.containers[0].env[0].name", "Invalid value: \"a=b\": a valid "
                                      "environment variable name must consist only of printable ASCII characters "
                                      "other than '='")], id="illegal character"),
    pytest.param([{"name": "tab\tin"}], [("spec.containers[0].env[0].name", "Invalid value: \"tab\\tin\": a valid "
                                          "environment variable name must consist only of printable ASCII "
                                          "characters other than '='")], id="non-printable character"),
    pytest.param([{"name": "abc", "value": "foo", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                 [("spec.containers[0].env[0].valueFrom", 'Invalid value: "": may not be specified when `value` '
                                                          "is not empty")], id="value and valueFrom"),
    pytest.param([{"name": "abc", "valueFrom": {}}],
                 [("spec.containers[0].env[0].valueFrom", 'Invalid value: "": must specify one of: `fieldRef`, '
                                                          "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`")],
                 id="valueFrom without a source"),
    pytest.param([{"name": "abc", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"},
                                                "secretKeyRef": {"name": "a-secret", "key": "k"}}}],
                 [("spec.containers[0].env[0].valueFrom", 'Invalid value: "": may not have more than one field '
                                                          "specified at a time")],
                 id="valueFrom.fieldRef and valueFrom.secretKeyRef"),
    pytest.param([{"name": "abc", "valueFrom": {"fieldRef": {}}}],
                 [("spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", "Required value")],
                 id="missing FieldPath on ObjectFieldSelector"),
    pytest.param([{"name": "abc", "valueFrom": {"configMapKeyRef": {"name": "$%^&*#", "key": "k"}}}],
                 [("spec.containers[0].env[0].valueFrom.configMapKeyRef.name", 'Invalid value: "$%^&*#": a '
                   "lowercase RFC 1123 subdomain must consist of")], id="invalid name on ConfigMapKeySelector"),
    pytest.param([{"name": "abc", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
                 [("spec.containers[0].env[0].valueFrom.secretKeyRef.key", "Required value")],
                 id="missing key on SecretKeySelector"),
    pytest.param([{"name": "abc", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a/b"}}}],
                 [("spec.containers[0].env[0].valueFrom.configMapKeyRef.key", 'Invalid value: "a/b": a valid config '
                   "key must consist of alphanumeric characters")], id="invalid key on ConfigMapKeySelector"),
]


@pytest.mark.parametrize("env,want", ENV_CASES)
def test_validate_env(env: list[Any], want: list[tuple[str, str]]) -> None:
    got = _errors(env=env)
    assert [f for f, _ in got] == [f for f, _ in want]
    for (_, message), (_, expected) in zip(got, want, strict=True):
        assert message.startswith(expected), message


ENV_FROM_CASES = [
    pytest.param([{"configMapRef": {"name": "abc"}}, {"prefix": "pre_", "secretRef": {"name": "abc"}},
                  {"prefix": "1digit", "configMapRef": {"name": "abc"}}], [], id="success cases"),
    pytest.param([{"configMapRef": {"name": ""}}], [("spec.containers[0].envFrom[0].configMapRef.name",
                                                     "Required value")], id="zero-length name"),
    pytest.param([{"prefix": "a=b", "configMapRef": {"name": "abc"}}],
                 [("spec.containers[0].envFrom[0].prefix", 'Invalid value: "a=b": a valid environment variable '
                                                           "name must consist only of printable ASCII")],
                 id="invalid prefix"),
    pytest.param([{"secretRef": {"name": "$"}}], [("spec.containers[0].envFrom[0].secretRef.name",
                                                   'Invalid value: "$": a lowercase RFC 1123 subdomain')],
                 id="invalid secret name"),
    pytest.param([{"prefix": "p"}], [("spec.containers[0].envFrom", 'Invalid value: "": must specify one of: '
                                                                    "`configMapRef` or `secretRef`")],
                 id="no source"),
    pytest.param([{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}],
                 [("spec.containers[0].envFrom", 'Invalid value: "": may not have more than one field specified '
                                                 "at a time")], id="both sources"),
]


@pytest.mark.parametrize("env_from,want", ENV_FROM_CASES)
def test_validate_env_from(env_from: list[Any], want: list[tuple[str, str]]) -> None:
    got = _errors(env_from=env_from)
    assert [f for f, _ in got] == [f for f, _ in want]
    for (_, message), (_, expected) in zip(got, want, strict=True):
        assert message.startswith(expected), message


def test_a_pod_with_a_nameless_variable_is_refused_at_create() -> None:
    """Through a real API server, a null item (decoded as the zero EnvVar, as Go's decoder does): 422 Invalid with
    the cause, and nothing stored."""
    async def main() -> tuple[int, str, int]:
        server = ApiServer(MemoryStore(), RealClock())
        await server.start()
        client = InProcessClient(server)
        pods = "/api/v1/namespaces/default/pods"
        try:
            await client.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                       "spec": {"containers": [{"name": "c", "image": "i", "env": [None]}]}})
        except ApiError as exc:
            stored = len((await client.get(pods)).get("items") or [])
            return exc.code, exc.message, stored
        finally:
            await server.stop()
        return 201, "", 1

    code, message, stored = asyncio.run(main())
    assert (code, stored) == (422, 0)
    assert message == 'Pod "p" is invalid: spec.containers[0].env[0].name: Required value'
