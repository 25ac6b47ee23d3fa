"""What configMap, secret, downwardAPI and projected volumes hold (kubelite/agent/volumes/projection.py), with cases
after pkg/volume/configmap TestMakePayload, pkg/volume/secret TestMakePayload, pkg/volume/downwardapi and
pkg/volume/projected TestCollectDataWithConfigMap/Secret/DownwardAPI: items, modes, optional sources."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubelite.agent.volumes.atomic_writer import FileProjection
from kubelite.agent.volumes.projection import MountError, format_map, payload
from tests.unit.volume_fakes import ScriptedTokens, StaticObjects

Obj = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


OBJECTS = StaticObjects(
    ("configmap", {"metadata": {"name": "cm", "namespace": "ns"}, "data": {"foo": "foo", "bar": "bar"},
                   "binaryData": {"bin": b64(b"\x00\x01")}}),
    ("secret", {"metadata": {"name": "sec", "namespace": "ns"}, "data": {"user": b64(b"admin"), "pw": b64(b"\xff")}}),
)
POD: Obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"b": "2", "a": 'q"uote'},
                         "annotations": {"note": "x"}},
            "spec": {"serviceAccountName": "robot", "containers": [
                {"name": "main", "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}}}],
                     "initContainers": [{"name": "side", "restartPolicy": "Always",
                                         "resources": {"limits": {"memory": "0"}}}]}}


NODE = {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi"}  # the node's allocatable


def fp(data: str | bytes, mode: int = 0o644) -> FileProjection:
    return FileProjection(data.encode() if isinstance(data, str) else data, mode)


PAYLOADS = [
    pytest.param({"configMap": {"name": "cm"}}, {"foo": fp("foo"), "bar": fp("bar"), "bin": fp(b"\x00\x01")},
                 id="configmap: no overrides"),
    pytest.param({"configMap": {"name": "cm", "items": [{"key": "foo", "path": "path/to/foo.txt"}]}},
                 {"path/to/foo.txt": fp("foo")}, id="configmap: basic 1"),
    pytest.param({"configMap": {"name": "cm", "defaultMode": 0o400,
                                "items": [{"key": "foo", "path": "foo.txt", "mode": 0o600},
                                          {"key": "bar", "path": "b"}]}},
                 {"foo.txt": fp("foo", 0o600), "b": fp("bar", 0o400)}, id="configmap: item mode over defaultMode"),
    pytest.param({"configMap": {"name": "cm", "optional": True, "items": [{"key": "nokey", "path": "x"}]}}, {},
                 id="configmap: optional missing key"),
    pytest.param({"configMap": {"name": "nope", "optional": True}}, {}, id="configmap: optional missing object"),
    pytest.param({"secret": {"secretName": "sec"}}, {"user": fp("admin"), "pw": fp(b"\xff")},
                 id="secret: no overrides"),
    pytest.param({"secret": {"secretName": "sec", "defaultMode": 0o400, "items": [{"key": "user", "path": "u"}]}},
                 {"u": fp("admin", 0o400)}, id="secret: items and defaultMode"),
    pytest.param({"downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "a", "fieldRef": {"fieldPath": "metadata.annotations['note']"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "1Mi"}},
        {"path": "cpu", "mode": 0o600, "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu",
                                                            "divisor": "1m"}}]}},
                 {"labels": fp('a="q\\"uote"\nb="2"'), "name": fp("p"), "a": fp("x"), "mem": fp("64"),
                  "cpu": fp("500", 0o600)}, id="downwardAPI: fields, labels map and resources"),
    pytest.param({"projected": {"defaultMode": 0o440, "sources": [
        {"configMap": {"name": "cm", "items": [{"key": "foo", "path": "foo"}]}},
        {"secret": {"name": "sec", "items": [{"key": "user", "path": "user"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}},
                 {"foo": fp("foo", 0o440), "user": fp("admin", 0o440), "namespace": fp("ns", 0o440),
                  "token": fp("token-1", 0o440)}, id="projected: every source kind (kube-api-access shape)"),
    pytest.param({"projected": {"sources": [{"configMap": {"name": "nope", "optional": True}},
                                            {"secret": {"name": "nope", "optional": True}}]}}, {},
                 id="projected: optional missing sources"),
    pytest.param({"downwardAPI": {"items": [
        {"path": "disk", "resourceFieldRef": {"containerName": "main", "resource": "limits.ephemeral-storage",
                                             "divisor": "1Gi"}},
        {"path": "sidecar-cpu", "resourceFieldRef": {"containerName": "side", "resource": "limits.cpu"}},
        {"path": "sidecar-mem", "resourceFieldRef": {"containerName": "side", "resource": "limits.memory",
                                                    "divisor": "1Mi"}},
        {"path": "req", "resourceFieldRef": {"containerName": "main", "resource": "requests.memory"}}]}},
                 {"disk": fp("100"), "sidecar-cpu": fp("4"), "sidecar-mem": fp("16384"), "req": fp("0")},
                 id="downwardAPI: an unset or zero limit is the node's allocatable (MergeContainerResourceLimits), "
                    "an unset request 0, an init container's too"),
]


@pytest.mark.parametrize("volume,want", PAYLOADS)
async def test_payloads(volume: Obj, want: dict[str, FileProjection]) -> None:
    files, _ = await payload(POD, {"name": "v", **volume}, OBJECTS.get, "10.0.0.1", ScriptedTokens().token, NODE)
    assert files == want


ERRORS = [
    pytest.param({"configMap": {"name": "nope"}}, 'configmap "nope" not found', id="configmap: missing object"),
    pytest.param({"configMap": {"name": "cm", "items": [{"key": "nokey", "path": "x"}]}},
                 "configmap references non-existent config key: nokey", id="configmap: missing key"),
    pytest.param({"secret": {"secretName": "nope"}}, 'secret "nope" not found', id="secret: missing object"),
    pytest.param({"secret": {"secretName": "sec", "items": [{"key": "nokey", "path": "x"}]}},
                 "secret references non-existent secret key: nokey", id="secret: missing key"),
    pytest.param({"projected": {"sources": [{"configMap": {"name": "nope"}}, {"secret": {"name": "gone"}}]}},
                 'configmap "nope" not found; secret "gone" not found', id="projected: every failing source named"),
    pytest.param({"downwardAPI": {"items": [{"path": "x", "resourceFieldRef": {"containerName": "ghost",
                                                                              "resource": "limits.cpu"}}]}},
                 "error while mapping volume x: container 'ghost' not found for resourceFieldRef",
                 id="downwardAPI: unknown container"),
]


@pytest.mark.parametrize("volume,message", ERRORS)
async def test_errors(volume: Obj, message: str) -> None:
    with pytest.raises(MountError) as err:
        await payload(POD, {"name": "v", **volume}, OBJECTS.get, "10.0.0.1", ScriptedTokens().token, NODE)
    assert str(err.value) == message


async def test_token_source_unavailable_fails_the_mount_clearly() -> None:
    volume = {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    with pytest.raises(MountError, match="failed to fetch token: the server could not find the requested resource"):
        await payload(POD, volume, OBJECTS.get, "10.0.0.1", ScriptedTokens(missing=True).token, NODE)


async def test_projected_token_refresh_time_is_reported() -> None:
    volume = {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    _, refresh = await payload(POD, volume, OBJECTS.get, "10.0.0.1", ScriptedTokens(refresh_at=123.0).token, NODE)
    assert refresh == 123.0


def test_format_map_sorts_and_quotes() -> None:
    assert format_map({"z": "1", "a": "two words"}) == 'a="two words"\nz="1"'
