"""A table-driven protobuf codec for Kubernetes messages (the table is generated from upstream's .proto files).

Decoding follows gogo-protobuf's Unmarshal and then encoding/json's Marshal, so the JSON is what an upstream
server would store: a non-pointer `omitempty` scalar at its zero value is left out (gogo writes every
non-pointer field, so `""`, `0` and `false` arrive for unset fields), a pointer keeps its zero (proto2 presence:
`replicas: 0`), and a non-pointer non-omitempty scalar that is absent gets its zero, as Go's struct field would.
The special apimachinery messages (Quantity, Time, MicroTime, Duration, IntOrString, RawExtension, FieldsV1, the
`type X []string` wrappers) have their own JSON forms.

Decoding refuses what upstream would not make sense of: an unknown field number, a wire type that does not match
the field, truncated data, invalid UTF-8, nesting deeper than the JSON path allows. Encoding refuses (EncodeError)
an object with a field the message does not have or a value of the wrong JSON type, so a caller can fall back to
JSON rather than silently drop data.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from kubelite.apiserver.proto import wellknown
from kubelite.apiserver.proto.flags import INLINE, MAP, OMITEMPTY, POINTER, REPEATED
from kubelite.apiserver.proto.table import KINDS, LISTS, MESSAGES

MAGIC = b"k8s\x00"
MAX_DEPTH = 100  # nested messages, as request.MAX_DEPTH bounds JSON bodies
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_WIRE = {"string": _LEN, "bytes": _LEN, "bool": _VARINT, "int32": _VARINT, "int64": _VARINT, "uint32": _VARINT,
         "uint64": _VARINT, "sint32": _VARINT, "sint64": _VARINT, "double": _I64, "fixed64": _I64,
         "sfixed64": _I64, "float": _I32, "fixed32": _I32, "sfixed32": _I32}
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1),
              "uint64": (0, 2**64 - 1), "sint32": (-(2**31), 2**31 - 1), "sint64": (-(2**63), 2**63 - 1),
              "fixed32": (0, 2**32 - 1), "fixed64": (0, 2**64 - 1), "sfixed32": (-(2**31), 2**31 - 1),
              "sfixed64": (-(2**63), 2**63 - 1)}
_ZERO: dict[str, Any] = {"string": "", "bytes": "", "bool": False, "double": 0.0, "float": 0.0}
_KIND_MESSAGES = frozenset(KINDS.values())
_TYPE_META = ("apiVersion", "kind")


class ProtobufError(ValueError):
    """Bad wire data: the request is a 400."""


class EncodeError(ValueError):
    """An object the message cannot carry without loss: answer JSON instead."""


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    name: str
    type: str  # a scalar type or a message key
    flags: int
    key_type: str  # for maps
    wire: int
    message: bool

    @property
    def zero(self) -> Any:
        return _ZERO.get(self.type, 0)


@dataclass(frozen=True, slots=True)
class Plan:
    key: str
    fields: tuple[Field, ...]
    by_number: dict[int, Field]
    names: frozenset[str]  # JSON keys the message (with its inlined children) accepts
    defaults: tuple[Field, ...]  # non-pointer, non-omitempty scalars: present in Go's JSON even when zero


_PLANS: dict[str, Plan] = {}


def plan(key: str) -> Plan:
    """The compiled form of one message of the table (cached)."""
    p = _PLANS.get(key)
    if p is None:
        fields = tuple(Field(n, name, typ, flags, key_type, _WIRE.get(typ, _LEN), typ not in _WIRE)
                       for n, name, typ, flags, key_type in MESSAGES[key])
        names = {f.name for f in fields if not f.flags & INLINE}
        for f in fields:
            if f.flags & INLINE:
                names |= plan(f.type).names
        if key in _KIND_MESSAGES:
            names |= set(_TYPE_META)
        defaults = tuple(f for f in fields if not f.message and not f.flags & (POINTER | OMITEMPTY | REPEATED | MAP))
        p = Plan(key, fields, {f.number: f for f in fields}, frozenset(names), defaults)
        _PLANS[key] = p
    return p


def message_for(api_version: str, kind: str) -> str | None:
    """The message of a kind: its group-version's, or meta/v1's for DeleteOptions, Status and the like."""
    return KINDS.get(f"{api_version}/{kind}") or KINDS.get(f"*/{kind}")


# --- wire reading --------------------------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise ProtobufError("unexpected EOF in a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("integer overflow in a varint")


def _scalar(typ: str, raw: int | tuple[int, int], buf: bytes) -> Any:
    """A scalar from its varint, or from a (start, end) slice of `buf` for strings, bytes and fixed widths."""
    if isinstance(raw, tuple):
        start, end = raw
        if typ == "string":
            try:
                return buf[start:end].decode()
            except UnicodeDecodeError:
                raise ProtobufError("invalid UTF-8 in a string field") from None
        if typ == "bytes":
            return base64.b64encode(buf[start:end]).decode()
        fmt = {"double": "<d", "float": "<f", "fixed64": "<Q", "sfixed64": "<q", "fixed32": "<I", "sfixed32": "<i"}
        return struct.unpack(fmt[typ], buf[start:end])[0]
    if typ == "bool":
        return raw != 0
    if typ in ("int32", "sint32") or typ in ("int64", "sint64"):
        if typ.startswith("sint"):
            raw = (raw >> 1) ^ -(raw & 1)
        bits = 32 if typ.endswith("32") else 64
        raw &= (1 << bits) - 1
        return raw - (1 << bits) if raw >> (bits - 1) else raw
    return raw & (0xFFFFFFFF if typ == "uint32" else 0xFFFFFFFFFFFFFFFF)


def _fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int | tuple[int, int]]]:
    """(number, wire type, varint value or (start, end)) for each field of a message."""
    out: list[tuple[int, int, int | tuple[int, int]]] = []
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError("illegal tag 0")
        value: int | tuple[int, int]
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end)
        elif wire == _LEN:
            length, pos = _varint(buf, pos, end)
            if length > end - pos:
                raise ProtobufError("unexpected EOF in a length-delimited field")
            value, pos = (pos, pos + length), pos + length
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if size > end - pos:
                raise ProtobufError("unexpected EOF in a fixed-width field")
            value, pos = (pos, pos + size), pos + size
        else:
            raise ProtobufError(f"illegal wireType {wire} for field {number}")
        out.append((number, wire, value))
    return out


# --- decoding ------------------------------------------------------------------------------------------------------


def decode_message(key: str, buf: bytes, pos: int = 0, end: int | None = None, depth: int = 1) -> Any:
    """The JSON value of message `key` in buf[pos:end]."""
    end = len(buf) if end is None else end
    if depth > MAX_DEPTH:
        raise ProtobufError(f"exceeded max depth {MAX_DEPTH}")
    special = _SPECIAL_DECODERS.get(key)
    if special is not None:
        return special(_raw_fields(key, buf, pos, end), buf, depth)
    if key in LISTS:
        return [_scalar("string", v, buf) for n, _, v in _fields(buf, pos, end) if n == 1 and isinstance(v, tuple)]
    p = plan(key)
    out: dict[str, Any] = {}
    for number, wire, value in _fields(buf, pos, end):
        f = p.by_number.get(number)
        if f is None:
            raise ProtobufError(f'unknown field {number} in message {key.rsplit(".", 1)[-1]}')
        if f.flags & MAP:
            _decode_entry(f, value, buf, out, depth)
        elif f.flags & REPEATED and wire == _LEN and not f.message and f.wire != _LEN:  # packed scalars
            assert isinstance(value, tuple)
            out.setdefault(f.name, []).extend(_packed(f, buf, *value))
        else:
            item = _value(f, wire, value, buf, depth, key)
            if f.flags & REPEATED:
                out.setdefault(f.name, []).append(item)
            elif f.flags & INLINE:
                out.update(item)
            elif item is None or (f.flags & OMITEMPTY and not f.flags & POINTER and not f.message and item == f.zero):
                out.pop(f.name, None)  # the last occurrence wins, as in proto2
            else:
                out[f.name] = item
    for f in p.defaults:
        out.setdefault(f.name, f.zero)
    return out


def _value(f: Field, wire: int, value: int | tuple[int, int], buf: bytes, depth: int, parent: str) -> Any:
    if wire != f.wire:
        raise ProtobufError(f'wrong wireType {wire} for field "{f.name}" of {parent.rsplit(".", 1)[-1]}')
    if f.message:
        assert isinstance(value, tuple)
        return decode_message(f.type, buf, value[0], value[1], depth + 1)
    return _scalar(f.type, value, buf)


def _packed(f: Field, buf: bytes, pos: int, end: int) -> list[Any]:
    items = []
    while pos < end:
        if f.wire == _VARINT:
            raw, pos = _varint(buf, pos, end)
            items.append(_scalar(f.type, raw, buf))
        else:
            size = 8 if f.wire == _I64 else 4
            if size > end - pos:
                raise ProtobufError("unexpected EOF in a packed field")
            items.append(_scalar(f.type, (pos, pos + size), buf))
            pos += size
    return items


def _decode_entry(f: Field, value: int | tuple[int, int], buf: bytes, out: dict[str, Any], depth: int) -> None:
    if not isinstance(value, tuple):
        raise ProtobufError(f'wrong wireType for map field "{f.name}"')
    k: Any = _ZERO.get(f.key_type, 0)
    v: Any = None
    for number, wire, item in _fields(buf, *value):
        if number == 1:
            k = _scalar(f.key_type, item, buf) if wire == _WIRE[f.key_type] else _wrong(f)
        elif number == 2:
            v = _value(f, wire, item, buf, depth, f.name)
        else:
            raise ProtobufError(f'unknown field {number} in an entry of map "{f.name}"')
    if v is None:
        v = decode_message(f.type, b"", 0, 0, depth + 1) if f.message else f.zero
    out.setdefault(f.name, {})[str(k)] = v


def _wrong(f: Field) -> Any:
    raise ProtobufError(f'wrong wireType for a key of map "{f.name}"')


def _raw_fields(key: str, buf: bytes, pos: int, end: int) -> dict[int, int | tuple[int, int]]:
    fields = plan(key).by_number
    out: dict[int, int | tuple[int, int]] = {}
    for number, wire, value in _fields(buf, pos, end):
        f = fields.get(number)
        if f is None:
            raise ProtobufError(f'unknown field {number} in message {key.rsplit(".", 1)[-1]}')
        if wire != f.wire:
            raise ProtobufError(f'wrong wireType {wire} for field {number} of {key.rsplit(".", 1)[-1]}')
        out[number] = value
    return out


def _string(fields: dict[int, int | tuple[int, int]], number: int, buf: bytes) -> str:
    value = fields.get(number)
    return _scalar("string", value, buf) if value is not None else ""


def _int(fields: dict[int, int | tuple[int, int]], number: int, typ: str = "int64") -> int:
    value = fields.get(number, 0)
    assert isinstance(value, int)
    return int(_scalar(typ, value, b""))


def _time(micro: bool) -> Callable[[dict[int, int | tuple[int, int]], bytes, int], str | None]:
    def decode(fields: dict[int, int | tuple[int, int]], buf: bytes, depth: int) -> str | None:
        try:
            return wellknown.format_time(_int(fields, 1), _int(fields, 2, "int32"), micro)
        except ValueError as exc:
            raise ProtobufError(str(exc)) from None
    return decode


def _int_or_string(fields: dict[int, int | tuple[int, int]], buf: bytes, depth: int) -> int | str:
    return _string(fields, 3, buf) if _int(fields, 1) == 1 else _int(fields, 2, "int32")


def _raw_json(fields: dict[int, int | tuple[int, int]], buf: bytes, depth: int) -> Any:
    """RawExtension.raw / FieldsV1.Raw: JSON bytes (or, inside a protobuf WatchEvent, a protobuf object)."""
    value = fields.get(1)
    if not isinstance(value, tuple) or value[0] == value[1]:
        return None
    raw = buf[value[0]:value[1]]
    if raw.startswith(MAGIC):
        return decode_object(raw, depth + 1)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtobufError(f"invalid JSON in a raw extension: {exc}") from None


def _duration(fields: dict[int, int | tuple[int, int]], buf: bytes, depth: int) -> str:
    return wellknown.format_duration(_int(fields, 1))


def _quantity(fields: dict[int, int | tuple[int, int]], buf: bytes, depth: int) -> str:
    return _string(fields, 1, buf) or "0"


_SPECIAL_DECODERS: dict[str, Callable[[dict[int, int | tuple[int, int]], bytes, int], Any]] = {
    "resource.Quantity": _quantity,
    "resource.QuantityValue": _quantity,
    "meta.v1.Time": _time(micro=False),
    "meta.v1.MicroTime": _time(micro=True),
    "meta.v1.Duration": _duration,
    "intstr.IntOrString": _int_or_string,
    "runtime.RawExtension": _raw_json,
    "meta.v1.FieldsV1": _raw_json,
}


def decode_object(body: bytes, depth: int = 1) -> dict[str, Any]:
    """A `k8s\\0` + runtime.Unknown envelope → the object as JSON, with its apiVersion and kind."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope (no k8s\\0 prefix)")
    fields = _raw_fields("runtime.Unknown", body, len(MAGIC), len(body))
    type_meta = fields.get(1)
    meta = _raw_fields("runtime.TypeMeta", body, *type_meta) if isinstance(type_meta, tuple) else {}
    api_version, kind = _string(meta, 1, body), _string(meta, 2, body)
    if _string(fields, 3, body):
        raise ProtobufError(f'unsupported contentEncoding "{_string(fields, 3, body)[:64]}"')
    key = message_for(api_version, kind)
    if key is None:
        raise UnknownKind(api_version, kind)
    raw = fields.get(2)
    start, end = raw if isinstance(raw, tuple) else (0, 0)
    obj = decode_message(key, body if isinstance(raw, tuple) else b"", start, end, depth)
    return {"apiVersion": api_version, "kind": kind, **obj}


class UnknownKind(ProtobufError):
    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"no protobuf message for kind {kind or '<empty>'} in {api_version or '<empty>'}")
        self.api_version, self.kind = api_version, kind


# --- encoding ------------------------------------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _uvarint(number << 3 | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _uvarint(len(payload)) + payload


def _encode_scalar(typ: str, value: Any, where: str) -> bytes:
    """The payload of a scalar (without its tag)."""
    if typ == "string":
        if not isinstance(value, str):
            raise EncodeError(f"{where}: expected a string")
        data = value.encode("utf-8", "surrogatepass")
        return _uvarint(len(data)) + data
    if typ == "bytes":
        if not isinstance(value, str):
            raise EncodeError(f"{where}: expected base64 bytes")
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise EncodeError(f"{where}: invalid base64") from None
        return _uvarint(len(data)) + data
    if typ == "bool":
        if not isinstance(value, bool):
            raise EncodeError(f"{where}: expected a boolean")
        return b"\x01" if value else b"\x00"
    if typ in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise EncodeError(f"{where}: expected a number")
        return struct.pack("<d" if typ == "double" else "<f", value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"{where}: expected an integer")
    low, high = _INT_RANGE[typ]
    if not low <= value <= high:
        raise EncodeError(f"{where}: {value} out of range for {typ}")
    if typ.startswith("sint"):
        value = (value << 1) ^ (value >> (63 if typ == "sint64" else 31))
    if typ in ("fixed32", "sfixed32", "fixed64", "sfixed64"):
        return struct.pack({"fixed32": "<I", "sfixed32": "<i", "fixed64": "<Q", "sfixed64": "<q"}[typ], value)
    return _uvarint(value & 0xFFFFFFFFFFFFFFFF)


def _encode_value(f: Field, value: Any, where: str, depth: int) -> bytes:
    """One occurrence of field f (tag included)."""
    if f.message:
        return _len_field(f.number, encode_message(f.type, value, where, depth + 1))
    return _tag(f.number, f.wire) + _encode_scalar(f.type, value, where)


def encode_message(key: str, value: Any, where: str = "", depth: int = 1) -> bytes:
    """The wire form of `value` as message `key` (EncodeError for anything it cannot carry)."""
    if depth > MAX_DEPTH:
        raise EncodeError(f"{where}: exceeded max depth {MAX_DEPTH}")
    special = _SPECIAL_ENCODERS.get(key)
    if special is not None:
        return special(value, where)
    if key in LISTS:
        if not isinstance(value, list):
            raise EncodeError(f"{where}: expected a list")
        return b"".join(_tag(1, _LEN) + _encode_scalar("string", v, where) for v in value)
    if not isinstance(value, dict):
        raise EncodeError(f"{where}: expected an object")
    p = plan(key)
    unknown = value.keys() - p.names
    if unknown:
        raise EncodeError(f'{where}: unknown field "{sorted(unknown)[0]}" for {key}')
    out = bytearray()
    for f in p.fields:
        if f.flags & INLINE:
            out += _len_field(f.number, encode_message(f.type, {k: v for k, v in value.items()
                                                                if k in plan(f.type).names}, where, depth + 1))
            continue
        item = value.get(f.name)
        if item is None:
            continue
        path = f"{where}.{f.name}"
        if f.flags & MAP:
            if not isinstance(item, dict):
                raise EncodeError(f"{path}: expected an object")
            for k in sorted(item):
                if item[k] is None and not f.message:
                    continue
                entry = _tag(1, _WIRE[f.key_type]) + _encode_scalar(f.key_type, k, path)
                entry += _encode_value(Field(2, f.name, f.type, 0, "", f.wire, f.message), item[k], path, depth)
                out += _len_field(f.number, entry)
        elif f.flags & REPEATED:
            if not isinstance(item, list):
                raise EncodeError(f"{path}: expected a list")
            for element in item:
                out += _encode_value(f, element, path, depth)
        else:
            out += _encode_value(f, item, path, depth)
    return bytes(out)


def _encode_time(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"{where}: expected an RFC 3339 time")
    try:
        seconds, nanos = wellknown.parse_time(value)
    except ValueError as exc:
        raise EncodeError(f"{where}: {exc}") from None
    return _tag(1, _VARINT) + _encode_scalar("int64", seconds, where) + \
        (_tag(2, _VARINT) + _encode_scalar("int32", nanos, where) if nanos else b"")


def _encode_quantity(value: Any, where: str) -> bytes:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)  # a JSON number where a quantity belongs: the string Quantity would parse it from
    return _tag(1, _LEN) + _encode_scalar("string", value, where)


def _encode_int_or_string(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        return _tag(1, _VARINT) + b"\x01" + _tag(3, _LEN) + _encode_scalar("string", value, where)
    return _tag(1, _VARINT) + b"\x00" + _tag(2, _VARINT) + _encode_scalar("int32", value, where)


def _encode_raw_json(value: Any, where: str) -> bytes:
    return _len_field(1, orjson.dumps(value))


def _encode_duration(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"{where}: expected a duration string")
    try:
        return _tag(1, _VARINT) + _encode_scalar("int64", wellknown.parse_duration(value), where)
    except ValueError as exc:
        raise EncodeError(f"{where}: {exc}") from None


_SPECIAL_ENCODERS: dict[str, Callable[[Any, str], bytes]] = {
    "resource.Quantity": _encode_quantity,
    "resource.QuantityValue": _encode_quantity,
    "meta.v1.Time": _encode_time,
    "meta.v1.MicroTime": _encode_time,
    "meta.v1.Duration": _encode_duration,
    "intstr.IntOrString": _encode_int_or_string,
    "runtime.RawExtension": _encode_raw_json,
    "meta.v1.FieldsV1": _encode_raw_json,
}


def encode_object(obj: dict[str, Any]) -> bytes:
    """An object with apiVersion and kind → `k8s\\0` + runtime.Unknown envelope (EncodeError if it has no message
    or holds something the message cannot carry)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    key = message_for(api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
    if key is None:
        raise EncodeError(f"no protobuf message for kind {kind} in {api_version}")
    raw = encode_message(key, obj, kind or "")
    type_meta = _len_field(1, api_version.encode()) + _len_field(2, kind.encode())  # type: ignore[union-attr]
    return MAGIC + _len_field(1, type_meta) + _len_field(2, raw) + _len_field(3, b"") + _len_field(4, b"")


def encode_watch_event(event_type: str, raw_object: bytes) -> bytes:
    """A bare metav1.WatchEvent {type, object: RawExtension{raw}} around an already-enveloped object."""
    return _len_field(1, event_type.encode()) + _len_field(2, _len_field(1, raw_object))
