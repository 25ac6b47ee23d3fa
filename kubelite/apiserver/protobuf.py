"""Decoding the protobuf bodies kubectl 1.32 sends (research/kubectl-compat.md §12).

kubectl's typed clients send `application/vnd.kubernetes.protobuf` for DeleteOptions
(`drain --disable-eviction`) and for the imperative `kubectl create namespace |
priorityclass | poddisruptionbudget | deployment | job`. Those messages are small, so they are
decoded by hand from k8s.io/api's generated.proto field numbers. A Container, PodSpec or JobSpec
field the decoder does not know is refused with a 415 rather than silently dropped, and so is any
other protobuf kind; the README says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
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


def _object(raw: bytes, spec: Callable[[bytes], Obj]) -> Obj:
    """A message of ObjectMeta (field 1) and a spec (field 2), as PodDisruptionBudget, PodTemplateSpec,
    Deployment and Job are."""
    o: Obj = {"spec": {}}
    for num, v in _fields(raw):
        if num == 1:
            o["metadata"] = _object_meta(v)
        elif num == 2:
            o["spec"] = spec(v)
    return o


def _pdb_spec(raw: bytes) -> Obj:
    spec: Obj = {}
    for n, x in _fields(raw):
        if n == 1:
            spec["minAvailable"] = _int_or_string(x)
        elif n == 2:
            spec["selector"] = _label_selector(x)
        elif n == 3:
            spec["maxUnavailable"] = _int_or_string(x)
        elif n == 4 and x:
            spec["unhealthyPodEvictionPolicy"] = x.decode()
    return spec


def _strings(fields: list[tuple[int, Any]], names: dict[int, str]) -> Obj:
    """The non-empty string fields among `fields` (gogo-protobuf writes empty strings too)."""
    return {names[n]: v.decode() for n, v in fields if n in names and v}


def _refuse_unknown(fields: list[tuple[int, Any]], known: Collection[int], message: str) -> None:
    """A non-empty field the decoder does not know is a 415, never silently dropped. gogo-protobuf writes
    unset non-pointer fields as empty strings, zeros and empty messages, so only those pass unread."""
    for n, v in fields:
        if n not in known and v:
            raise UnsupportedKind(f"protobuf {message} field {n} is not supported; send JSON")


def _repeated(fields: list[tuple[int, Any]], num: int, decode: Callable[[Any], Any]) -> list[Any]:
    return [decode(v) for n, v in fields if n == num]


def _container_port(raw: bytes) -> Obj:
    fields = list(_fields(raw))
    _refuse_unknown(fields, (1, 2, 3, 4, 5), "ContainerPort")
    port = _strings(fields, {1: "name", 4: "protocol", 5: "hostIP"})
    port.update({key: _int64(v) for n, v in fields for num, key in ((2, "hostPort"), (3, "containerPort"))
                 if n == num and v})
    return port


def _env_var(raw: bytes) -> Obj:
    fields = list(_fields(raw))
    _refuse_unknown(fields, (1, 2), "EnvVar")
    return _strings(fields, {1: "name", 2: "value"})


def _quantities(entries: list[bytes]) -> dict[str, str]:
    """map<string, Quantity>; a Quantity is `{string = 1}`."""
    return {kv.get(1, b"").decode(): dict(_fields(kv.get(2, b""))).get(1, b"").decode()
            for kv in (dict(_fields(e)) for e in entries)}


def _resources(raw: bytes) -> Obj:
    fields = list(_fields(raw))
    _refuse_unknown(fields, (1, 2), "ResourceRequirements")
    out: Obj = {}
    for num, key in ((1, "limits"), (2, "requests")):
        entries = [v for n, v in fields if n == num]
        if entries:
            out[key] = _quantities(entries)
    return out


def _container(raw: bytes) -> Obj:
    """A Container as `kubectl create deployment|job` fills it (core/v1 generated.proto field numbers)."""
    fields = list(_fields(raw))
    _refuse_unknown(fields, (1, 2, 3, 4, 5, 6, 7, 8, 14), "Container")
    c: Obj = _strings(fields, {1: "name", 2: "image", 5: "workingDir", 14: "imagePullPolicy"})
    for num, key, decode in ((3, "command", bytes.decode), (4, "args", bytes.decode),
                             (6, "ports", _container_port), (7, "env", _env_var)):
        values = _repeated(fields, num, decode)
        if values:
            c[key] = values
    for resources in _repeated(fields, 8, _resources):
        c["resources"] = resources
    return c


def _pod_spec(raw: bytes) -> Obj:
    fields = list(_fields(raw))
    _refuse_unknown(fields, (2, 3, 4, 8, 20), "PodSpec")
    spec: Obj = _strings(fields, {3: "restartPolicy", 8: "serviceAccountName"})
    for num, key in ((2, "containers"), (20, "initContainers")):
        containers = _repeated(fields, num, _container)
        if containers:
            spec[key] = containers
    for grace in _repeated(fields, 4, _int64):  # a pointer: present only when set, and 0 means "kill now"
        spec["terminationGracePeriodSeconds"] = grace
    return spec


def _pod_template(raw: bytes) -> Obj:
    return _object(raw, _pod_spec)


def _deployment_spec(raw: bytes) -> Obj:
    """apps/v1 DeploymentSpec, as `kubectl create deployment` sends it."""
    spec: Obj = {}
    for n, x in _fields(raw):
        if n == 1:
            spec["replicas"] = _int64(x)
        elif n == 2:
            spec["selector"] = _label_selector(x)
        elif n == 3:
            spec["template"] = _pod_template(x)
        elif n == 4 and x:
            kind = dict(_fields(x)).get(1)
            if kind:
                spec["strategy"] = {"type": kind.decode()}
    return spec


_JOB_INTS = {1: "parallelism", 2: "completions", 3: "activeDeadlineSeconds", 7: "backoffLimit",
             8: "ttlSecondsAfterFinished"}


def _job_spec(raw: bytes) -> Obj:
    """batch/v1 JobSpec as `kubectl create job NAME --image=… -- CMD` sends it (batch/v1 generated.proto)."""
    fields = list(_fields(raw))
    _refuse_unknown(fields, range(1, 11), "JobSpec")
    spec: Obj = {}
    for n, x in fields:
        if n in _JOB_INTS:
            spec[_JOB_INTS[n]] = _int64(x)
        elif n == 4:
            spec["selector"] = _label_selector(x)
        elif n == 5:
            spec["manualSelector"] = bool(x)
        elif n == 6:
            spec["template"] = _pod_template(x)
        elif n == 9 and x:
            spec["completionMode"] = x.decode()
        elif n == 10:
            spec["suspend"] = bool(x)
    return spec


def _token_request_spec(raw: bytes) -> Obj:
    """authentication/v1 TokenRequestSpec as `kubectl create token` sends it: audiences (1), boundObjectRef (3:
    kind, apiVersion, name, uid), expirationSeconds (4)."""
    spec: Obj = {}
    for n, x in _fields(raw):
        if n == 1:
            spec.setdefault("audiences", []).append(x.decode())
        elif n == 3:
            spec["boundObjectRef"] = _strings(list(_fields(x)), {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"})
        elif n == 4:
            spec["expirationSeconds"] = _int64(x)
    return spec


def _service_account(raw: bytes) -> Obj:
    """core/v1 ServiceAccount as `kubectl create serviceaccount` sends it (metadata; automount, field 4)."""
    fields = list(_fields(raw))
    _refuse_unknown(fields, (1, 4), "ServiceAccount")
    o: Obj = {}
    for n, x in fields:
        if n == 1:
            o["metadata"] = _object_meta(x)
        elif n == 4:
            o["automountServiceAccountToken"] = bool(x)
    return o


DECODERS: dict[str, Callable[[bytes], Obj]] = {
    "TokenRequest": lambda raw: _object(raw, _token_request_spec),
    "ServiceAccount": _service_account,
    "Deployment": lambda raw: _object(raw, _deployment_spec),
    "DeleteOptions": _delete_options,
    "Namespace": _namespace,
    "PriorityClass": _priority_class,
    "PodDisruptionBudget": lambda raw: _object(raw, _pdb_spec),
    "Job": lambda raw: _object(raw, _job_spec),
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
