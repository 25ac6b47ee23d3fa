"""Decoding the protobuf bodies kubectl 1.32 sends (research/kubectl-compat.md §12).

kubectl's typed clients send `application/vnd.kubernetes.protobuf` for DeleteOptions
(`drain --disable-eviction`) and for the imperative `kubectl create namespace |
priorityclass | poddisruptionbudget | deployment`. Those messages are small, so they are decoded
by hand from k8s.io/api's generated.proto field numbers; any other protobuf kind gets
a clear 415, and the README says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Obj = dict[str, Any]
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    pass


class UnsupportedKind(ProtobufError):
    pass


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(b):
            raise ProtobufError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7


def _fields(b: bytes) -> Iterator[tuple[int, Any]]:
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        v: Any
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            i += n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield num, v


def _int64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _string_map(entries: list[bytes]) -> dict[str, str]:
    out = {}
    for e in entries:
        kv = {n: x.decode() for n, x in _fields(e)}
        out[kv.get(1, "")] = kv.get(2, "")
    return out


def _object_meta(b: bytes) -> Obj:
    meta: Obj = {}
    labels: list[bytes] = []
    annotations: list[bytes] = []
    for num, v in _fields(b):
        if num == 1:
            meta["name"] = v.decode()
        elif num == 2:
            meta["generateName"] = v.decode()
        elif num == 3:
            meta["namespace"] = v.decode()
        elif num == 6:
            meta["resourceVersion"] = v.decode()
        elif num == 11:
            labels.append(v)
        elif num == 12:
            annotations.append(v)
        elif num == 14:
            meta.setdefault("finalizers", []).append(v.decode())
    if labels:
        meta["labels"] = _string_map(labels)
    if annotations:
        meta["annotations"] = _string_map(annotations)
    return {k: v for k, v in meta.items() if v != ""}


def _int_or_string(b: bytes) -> int | str:
    f = dict(_fields(b))
    return f[3].decode() if f.get(1) == 1 else _int64(f.get(2, 0))


def _label_selector(b: bytes) -> Obj:
    match_labels: list[bytes] = []
    exprs = []
    for num, v in _fields(b):
        if num == 1:
            match_labels.append(v)
        elif num == 2:
            e: Obj = {}
            for n, x in _fields(v):
                if n == 1:
                    e["key"] = x.decode()
                elif n == 2:
                    e["operator"] = x.decode()
                elif n == 3:
                    e.setdefault("values", []).append(x.decode())
            exprs.append(e)
    out: Obj = {}
    if match_labels:
        out["matchLabels"] = _string_map(match_labels)
    if exprs:
        out["matchExpressions"] = exprs
    return out


def _delete_options(raw: bytes) -> Obj:
    o: Obj = {}
    for num, v in _fields(raw):
        if num == 1:
            o["gracePeriodSeconds"] = _int64(v)
        elif num == 2:
            o["preconditions"] = {("uid" if n == 1 else "resourceVersion"): x.decode() for n, x in _fields(v)}
        elif num == 3:
            o["orphanDependents"] = bool(v)
        elif num == 4:
            o["propagationPolicy"] = v.decode()
        elif num == 5:
            o.setdefault("dryRun", []).append(v.decode())
    return o


def _namespace(raw: bytes) -> Obj:
    return {"metadata": next((_object_meta(v) for n, v in _fields(raw) if n == 1), {})}


def _priority_class(raw: bytes) -> Obj:
    o: Obj = {}
    for num, v in _fields(raw):
        if num == 1:
            o["metadata"] = _object_meta(v)
        elif num == 2:
            o["value"] = _int64(v) if _int64(v) < 1 << 31 else _int64(v) - (1 << 32)
        elif num == 3:
            o["globalDefault"] = bool(v)
        elif num == 4 and v:
            o["description"] = v.decode()
        elif num == 5 and v:
            o["preemptionPolicy"] = v.decode()
    return o


def _pdb(raw: bytes) -> Obj:
    o: Obj = {"spec": {}}
    for num, v in _fields(raw):
        if num == 1:
            o["metadata"] = _object_meta(v)
        elif num == 2:
            for n, x in _fields(v):
                if n == 1:
                    o["spec"]["minAvailable"] = _int_or_string(x)
                elif n == 2:
                    o["spec"]["selector"] = _label_selector(x)
                elif n == 3:
                    o["spec"]["maxUnavailable"] = _int_or_string(x)
                elif n == 4 and x:
                    o["spec"]["unhealthyPodEvictionPolicy"] = x.decode()
    return o


_CONTAINER_STRINGS = {1: "name", 2: "image", 5: "workingDir", 14: "imagePullPolicy"}


def _container(b: bytes) -> Obj:
    """The Container fields `kubectl create deployment|job` can send; any other field is refused (415)
    rather than silently dropped."""
    c: Obj = {}
    for num, v in _fields(b):
        if num in _CONTAINER_STRINGS:
            c[_CONTAINER_STRINGS[num]] = v.decode()
        elif num in (3, 4):
            c.setdefault("command" if num == 3 else "args", []).append(v.decode())
        elif num == 6:
            port = dict(_fields(v))
            c.setdefault("ports", []).append({k: (port[n].decode() if n in (1, 4) else port[n])
                                              for n, k in ((1, "name"), (3, "containerPort"), (4, "protocol"))
                                              if n in port})
        elif num == 7:
            env = dict(_fields(v))
            c.setdefault("env", []).append({"name": env.get(1, b"").decode(), "value": env.get(2, b"").decode()})
        elif num == 8 and not v:
            c["resources"] = {}
        elif v:
            raise UnsupportedKind(f"protobuf Container field {num} is not supported; send JSON")
    return c


def _pod_template(b: bytes) -> Obj:
    t: Obj = {"metadata": {}, "spec": {}}
    for num, v in _fields(b):
        if num == 1:
            t["metadata"] = _object_meta(v)
        elif num == 2:
            for n, x in _fields(v):
                if n == 2:
                    t["spec"].setdefault("containers", []).append(_container(x))
                elif n == 3 and x:
                    t["spec"]["restartPolicy"] = x.decode()
                elif x:
                    raise UnsupportedKind(f"protobuf PodSpec field {n} is not supported; send JSON")
    return t


def _deployment(raw: bytes) -> Obj:
    """apps/v1 Deployment, as `kubectl create deployment` sends it."""
    o: Obj = {"spec": {}}
    for num, v in _fields(raw):
        if num == 1:
            o["metadata"] = _object_meta(v)
        elif num == 2:
            for n, x in _fields(v):
                if n == 1:
                    o["spec"]["replicas"] = _int64(x)
                elif n == 2:
                    o["spec"]["selector"] = _label_selector(x)
                elif n == 3:
                    o["spec"]["template"] = _pod_template(x)
                elif n == 4 and x:
                    kind = dict(_fields(x)).get(1)
                    if kind:
                        o["spec"]["strategy"] = {"type": kind.decode()}
    return o


DECODERS: dict[str, Callable[[bytes], Obj]] = {
    "Deployment": _deployment,
    "DeleteOptions": _delete_options,
    "Namespace": _namespace,
    "PriorityClass": _priority_class,
    "PodDisruptionBudget": _pdb,
}


def decode(body: bytes) -> Obj:
    """Decode a `k8s\\0` envelope into a JSON-shaped dict, or raise ProtobufError naming the kind."""
    try:
        return _decode(body)
    except UnicodeDecodeError as exc:
        raise ProtobufError(f"proto: invalid UTF-8 in a string field: {exc.reason}") from None


def _decode(body: bytes) -> Obj:
    if body[:4] != MAGIC:
        raise ProtobufError("not a Kubernetes protobuf envelope")
    type_meta: dict[int, str] = {}
    raw = b""
    for num, v in _fields(body[4:]):
        if num == 1:
            if not isinstance(v, bytes) or not all(isinstance(x, bytes) for _, x in _fields(v)):
                raise ProtobufError("proto: wrong wireType for a field of TypeMeta")
            type_meta = {n: x.decode() for n, x in _fields(v)}
        elif num == 2:
            raw = v
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    decoder = DECODERS.get(kind)
    if decoder is None:
        raise UnsupportedKind(f"protobuf bodies of kind {kind or '<unknown>'} are not supported; "
                            "send JSON (kubectl create -f / apply -f)")
    try:
        obj = decoder(raw)
    except (AttributeError, TypeError):  # a varint where bytes belong, or the reverse (gogo: "wrong wireType")
        raise ProtobufError(f"proto: wrong wireType for a field of {kind}") from None
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj
