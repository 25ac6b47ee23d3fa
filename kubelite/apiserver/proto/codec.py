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
from kubelite.clock import format_duration, parse_duration

MAGIC = b"k8s\x00"
MAX_DEPTH = 100  # nested messages, as request.MAX_DEPTH bounds JSON bodies
# Fields one body may decode to. About 1-2 µs each in pure Python: a 3 MiB body of empty messages would hold the
# event loop for over a second (orjson parses as many `{}` in 0.13 s); this bound keeps it near 0.25 s. A 1 MiB
# ConfigMap of 100,000 keys needs 100,000.
MAX_VALUES = 150_000
_budget = [MAX_VALUES]  # what the decode in progress may still produce (decoding is synchronous)
_lenient = [False]  # whether the encoding in progress leaves out JSON keys its message lacks
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1
_TYPE_META = ("apiVersion", "kind")
_KIND_MESSAGES = frozenset(KINDS.values())


class ProtobufError(ValueError):
    """Bad wire data: the request is a 400."""


class EncodeError(ValueError):
    """An object the message cannot carry without loss: answer JSON instead."""


class UnknownKind(ProtobufError):
    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f"no protobuf message for kind {kind or '<empty>'} in {api_version or '<empty>'}")
        self.api_version, self.kind = api_version, kind


# --- varints -------------------------------------------------------------------------------------------------------

_SMALL = [bytes([i]) for i in range(128)]


def _uvarint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


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


def _len_field(number: int, payload: bytes) -> bytes:
    return _uvarint(number << 3 | _LEN) + _uvarint(len(payload)) + payload


# --- scalar types: wire type, decoding from the wire, encoding to a payload ---------------------------------------


def _signed(bits: int) -> Callable[[int], int]:
    top, mask = 1 << (bits - 1), (1 << bits) - 1

    def convert(v: int) -> int:
        v &= mask
        return v - (1 << bits) if v & top else v
    return convert


def _zigzag(bits: int) -> Callable[[int], int]:
    signed = _signed(bits)
    return lambda v: signed((v >> 1) ^ -(v & 1))


def _int_encoder(low: int, high: int, zigzag: int = 0) -> Callable[[Any, Field, int], bytes]:
    def encode(value: Any, f: Field, depth: int) -> bytes:
        if type(value) is not int or not low <= value <= high:
            raise EncodeError(f'field "{f.name}": expected an integer in [{low}, {high}], got {value!r:.40}')
        if zigzag:
            value = (value << 1) ^ (value >> zigzag)
        return _uvarint(value & _MASK64)
    return encode


def _fixed_encoder(fmt: str, kinds: tuple[type, ...]) -> Callable[[Any, Field, int], bytes]:
    def encode(value: Any, f: Field, depth: int) -> bytes:
        if type(value) not in kinds:
            raise EncodeError(f'field "{f.name}": expected a number, got {value!r:.40}')
        try:
            return struct.pack(fmt, value)
        except struct.error:
            raise EncodeError(f'field "{f.name}": {value!r:.40} out of range') from None
    return encode


def _encode_string(value: Any, f: Field, depth: int) -> bytes:
    if type(value) is not str:
        raise EncodeError(f'field "{f.name}": expected a string, got {value!r:.40}')
    data = value.encode("utf-8", "surrogatepass")
    return _uvarint(len(data)) + data


def _encode_bytes(value: Any, f: Field, depth: int) -> bytes:
    if type(value) is not str:
        raise EncodeError(f'field "{f.name}": expected base64 bytes')
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EncodeError(f'field "{f.name}": invalid base64') from None
    return _uvarint(len(data)) + data


def _encode_bool(value: Any, f: Field, depth: int) -> bytes:
    if type(value) is not bool:
        raise EncodeError(f'field "{f.name}": expected a boolean, got {value!r:.40}')
    return b"\x01" if value else b"\x00"


def _encode_nested(value: Any, f: Field, depth: int) -> bytes:
    data = encode_message(f.type, value, depth + 1)
    return _uvarint(len(data)) + data


_I32_RANGE, _I64_RANGE = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
_FIXED = {"double": ("<d", 8), "float": ("<f", 4), "fixed64": ("<Q", 8), "sfixed64": ("<q", 8),
          "fixed32": ("<I", 4), "sfixed32": ("<i", 4)}
# type → (wire type, decode a varint, encode a payload, zero value)
_SCALARS: dict[str, tuple[int, Callable[[int], Any] | None, Callable[[Any, Field, int], bytes], Any]] = {
    "string": (_LEN, None, _encode_string, ""),
    "bytes": (_LEN, None, _encode_bytes, ""),
    "bool": (_VARINT, bool, _encode_bool, False),
    "int32": (_VARINT, _signed(32), _int_encoder(*_I32_RANGE), 0),
    "int64": (_VARINT, _signed(64), _int_encoder(*_I64_RANGE), 0),
    "uint32": (_VARINT, lambda v: v & 0xFFFFFFFF, _int_encoder(0, 2**32 - 1), 0),
    "uint64": (_VARINT, lambda v: v & _MASK64, _int_encoder(0, _MASK64), 0),
    "sint32": (_VARINT, _zigzag(32), _int_encoder(*_I32_RANGE, zigzag=31), 0),
    "sint64": (_VARINT, _zigzag(64), _int_encoder(*_I64_RANGE, zigzag=63), 0),
    **{name: (_I64 if size == 8 else _I32, None,
              _fixed_encoder(fmt, (int, float) if name in ("double", "float") else (int,)),
              0.0 if name in ("double", "float") else 0)
       for name, (fmt, size) in _FIXED.items()},
}

# How a field's values sit in its parent's JSON.
_PLAIN, _REPEATED, _MAP, _INLINE = range(4)
# How a length-delimited value decodes.
_STRING, _BYTES, _MESSAGE, _ENTRY, _NOT_LEN = range(5)


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    name: str
    type: str  # a scalar type or a message key
    flags: int
    key_type: str  # for maps
    wire: int
    message: bool
    tag: bytes  # the encoded key of this field
    mode: int
    ld: int  # how a length-delimited value decodes (_NOT_LEN for varint and fixed-width types)
    convert: Callable[[int], Any] | None  # varint → value
    encode: Callable[[Any, Field, int], bytes]  # value → payload (length-prefixed for _LEN)
    zero: Any
    drop_zero: bool  # a non-pointer `omitempty` scalar: Go's JSON leaves its zero out

    @staticmethod
    def build(number: int, name: str, typ: str, flags: int, key_type: str) -> Field:
        scalar = _SCALARS.get(typ)
        wire, convert, encode, zero = scalar if scalar else (_LEN, None, _encode_nested, None)
        mode = _MAP if flags & MAP else _REPEATED if flags & REPEATED else _INLINE if flags & INLINE else _PLAIN
        ld = _ENTRY if mode == _MAP else _MESSAGE if scalar is None else _STRING if typ == "string" \
            else _BYTES if typ == "bytes" else _NOT_LEN
        wire = _LEN if mode == _MAP else wire
        return Field(number, name, typ, flags, key_type, wire, scalar is None, _uvarint(number << 3 | wire), mode,
                     ld, convert, encode, zero, bool(scalar and flags & OMITEMPTY and not flags & POINTER))

    def entry_parts(self) -> tuple[Field, Field]:
        """A map entry's key (field 1) and value (field 2)."""
        return (Field.build(1, self.name, self.key_type, 0, ""), Field.build(2, self.name, self.type, 0, ""))


@dataclass(frozen=True, slots=True)
class Plan:
    fields: tuple[Field, ...]
    by_number: dict[int, Field]
    names: frozenset[str]  # JSON keys the message (with its inlined children) accepts
    defaults: tuple[Field, ...]  # non-pointer, non-omitempty scalars: present in Go's JSON even when zero
    entries: dict[int, tuple[Field, Field]]  # map fields' entry key and value
    by_name: dict[str, Field]  # JSON key → field; an inlined struct's keys → the inline field
    inline: tuple[Field, ...]


_PLANS: dict[str, Plan] = {}


def plan(key: str) -> Plan:
    """The compiled form of one message of the table (cached)."""
    p = _PLANS.get(key)
    if p is None:
        fields = tuple(Field.build(*spec) for spec in MESSAGES[key])
        names = {f.name for f in fields if f.mode != _INLINE}
        for f in fields:
            if f.mode == _INLINE:
                names |= plan(f.type).names
        if key in _KIND_MESSAGES:
            names |= set(_TYPE_META)
        defaults = tuple(f for f in fields
                         if not f.message and f.mode == _PLAIN and not f.flags & (POINTER | OMITEMPTY))
        by_name = {f.name: f for f in fields if f.mode != _INLINE}
        for f in fields:
            if f.mode == _INLINE:
                by_name.update(dict.fromkeys(plan(f.type).names, f))
        p = Plan(fields, {f.number: f for f in fields}, frozenset(names), defaults,
                 {f.number: f.entry_parts() for f in fields if f.mode == _MAP}, by_name,
                 tuple(f for f in fields if f.mode == _INLINE))
        _PLANS[key] = p
    return p


def message_for(api_version: str, kind: str) -> str | None:
    """The message of a kind: its group-version's, or meta/v1's for DeleteOptions, Status and the like."""
    return KINDS.get(f"{api_version}/{kind}") or KINDS.get(f"*/{kind}")


# --- decoding ------------------------------------------------------------------------------------------------------


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _read(f: Field, wire: int, buf: bytes, pos: int, end: int, depth: int, key: str) -> tuple[Any, int]:
    """One value of field f, whose key (with `wire`) has been read; returns it and the position after it."""
    if wire == _LEN:
        if pos >= end:
            raise ProtobufError("unexpected EOF in a length-delimited field")
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = _varint(buf, pos, end)
        start, pos = pos, pos + n
        if pos > end:
            raise ProtobufError("unexpected EOF in a length-delimited field")
        ld = f.ld
        if ld == _STRING:
            try:
                return buf[start:pos].decode(), pos
            except UnicodeDecodeError:
                raise ProtobufError(f'invalid UTF-8 in field "{f.name}" of {_short(key)}') from None
        if ld == _MESSAGE:
            return decode_message(f.type, buf, start, pos, depth + 1), pos
        if ld == _ENTRY:
            return _entry(f, buf, start, pos, depth, key), pos
        if ld == _BYTES:
            return base64.b64encode(buf[start:pos]).decode(), pos
        if f.mode == _REPEATED:  # a packed repeated scalar
            return _packed(f, buf, start, pos, key), pos
    elif wire == _VARINT:
        if f.wire == _VARINT and f.convert is not None:
            if pos < end and buf[pos] < 0x80:
                return f.convert(buf[pos]), pos + 1
            value, pos = _varint(buf, pos, end)
            return f.convert(value), pos
    elif wire in (_I64, _I32):
        size = 8 if wire == _I64 else 4
        if pos + size > end:
            raise ProtobufError("unexpected EOF in a fixed-width field")
        if f.wire == wire:
            return struct.unpack_from(_FIXED[f.type][0], buf, pos)[0], pos + size
    else:
        raise ProtobufError(f"illegal wireType {wire} for field {f.number} of {_short(key)}")
    raise ProtobufError(f'wrong wireType {wire} for field "{f.name}" of {_short(key)}')


def _spend() -> None:
    _budget[0] -= 1
    if _budget[0] < 0:
        raise ProtobufError(f"more than {MAX_VALUES} fields in one body")


def _packed(f: Field, buf: bytes, pos: int, end: int, key: str) -> list[Any]:
    items = []
    while pos < end:
        _spend()
        item, pos = _read(f, f.wire, buf, pos, end, 0, key)
        items.append(item)
    return items


def _entry(f: Field, buf: bytes, pos: int, end: int, depth: int, key: str) -> tuple[Any, Any]:
    key_field, value_field = plan(key).entries[f.number]
    k, v = key_field.zero, None
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag >> 3 == 1:
            k, pos = _read(key_field, tag & 7, buf, pos, end, depth, key)
        elif tag >> 3 == 2:
            v, pos = _read(value_field, tag & 7, buf, pos, end, depth, key)
        else:
            raise ProtobufError(f'unknown field {tag >> 3} in an entry of map "{f.name}"')
    if v is None:
        v = decode_message(f.type, b"", 0, 0, depth + 1) if f.message else value_field.zero
    return str(k), v


def decode_message(key: str, buf: bytes, pos: int = 0, end: int | None = None, depth: int = 1) -> Any:
    """The JSON value of message `key` in buf[pos:end]."""
    end = len(buf) if end is None else end
    if depth == 1:
        _budget[0] = MAX_VALUES
    elif depth > MAX_DEPTH:
        raise ProtobufError(f"exceeded max depth {MAX_DEPTH}")
    special = _SPECIAL_DECODERS.get(key)
    if special is not None:
        return special(_raw_fields(key, buf, pos, end), buf, depth)
    if key in LISTS:
        return [item for number, item in _values(key, buf, pos, end, depth) if number == 1]
    p = plan(key)
    by_number = p.by_number
    out: dict[str, Any] = {}
    budget = _budget
    while pos < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise ProtobufError(f"more than {MAX_VALUES} fields in one body")
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos, end)
        f = by_number.get(tag >> 3)
        if f is None:
            raise ProtobufError("illegal tag 0" if tag >> 3 == 0 else
                                f"unknown field {tag >> 3} in message {_short(key)}")
        ld = f.ld
        if tag & 7 == _LEN and pos < end and buf[pos] < 0x80 and ld <= _MESSAGE and pos + 1 + buf[pos] <= end:
            start, pos = pos + 1, pos + 1 + buf[pos]  # the common case, a short string or message, inline
            if ld == _MESSAGE:
                item = decode_message(f.type, buf, start, pos, depth + 1)
            elif ld == _STRING:
                try:
                    item = buf[start:pos].decode()
                except UnicodeDecodeError:
                    raise ProtobufError(f'invalid UTF-8 in field "{f.name}" of {_short(key)}') from None
            else:
                item = base64.b64encode(buf[start:pos]).decode()
        else:
            item, pos = _read(f, tag & 7, buf, pos, end, depth, key)
        mode = f.mode
        if mode == _PLAIN:
            if item is None or (f.drop_zero and item == f.zero):
                out.pop(f.name, None)  # the last occurrence wins, as in proto2
            else:
                out[f.name] = item
        elif mode == _REPEATED:
            values = out.get(f.name)
            if values is None:
                out[f.name] = values = []
            if isinstance(item, list) and not f.message and f.ld == _NOT_LEN:
                values.extend(item)
            else:
                values.append(item)
        elif mode == _MAP:
            out.setdefault(f.name, {})[item[0]] = item[1]
        else:
            out.update(item)
    for f in p.defaults:
        out.setdefault(f.name, f.zero)
    return out


def _values(key: str, buf: bytes, pos: int, end: int, depth: int) -> list[tuple[int, Any]]:
    """(number, value) of every field of a message, in order: for the special messages and list wrappers."""
    by_number = plan(key).by_number
    out = []
    while pos < end:
        _spend()
        tag, pos = _varint(buf, pos, end)
        f = by_number.get(tag >> 3)
        if f is None:
            raise ProtobufError(f"unknown field {tag >> 3} in message {_short(key)}")
        item, pos = _read(f, tag & 7, buf, pos, end, depth, key)
        out.append((f.number, item))
    return out


def _raw_fields(key: str, buf: bytes, pos: int, end: int) -> dict[int, Any]:
    return dict(_values(key, buf, pos, end, 0))


def _time(micro: bool) -> Callable[[dict[int, Any], bytes, int], str | None]:
    def decode(fields: dict[int, Any], buf: bytes, depth: int) -> str | None:
        try:
            return wellknown.format_time(fields.get(1, 0), fields.get(2, 0), micro)
        except ValueError as exc:
            raise ProtobufError(str(exc)) from None
    return decode


def _int_or_string(fields: dict[int, Any], buf: bytes, depth: int) -> int | str:
    return str(fields.get(3, "")) if fields.get(1, 0) == 1 else int(fields.get(2, 0))


def _raw_json(fields: dict[int, Any], buf: bytes, depth: int) -> Any:
    """RawExtension.raw / FieldsV1.Raw: JSON bytes (or, inside a protobuf WatchEvent, an enveloped object)."""
    raw = base64.b64decode(fields.get(1, ""))
    if not raw:
        return None
    if raw.startswith(MAGIC):
        return decode_object(raw, depth + 1)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtobufError(f"invalid JSON in a raw extension: {exc}") from None


_SPECIAL_DECODERS: dict[str, Callable[[dict[int, Any], bytes, int], Any]] = {
    "resource.Quantity": lambda fields, buf, depth: fields.get(1) or "0",  # Go's zero Quantity is "0"
    "resource.QuantityValue": lambda fields, buf, depth: fields.get(1) or "0",
    "meta.v1.Time": _time(micro=False),
    "meta.v1.MicroTime": _time(micro=True),
    "meta.v1.Duration": lambda fields, buf, depth: format_duration(fields.get(1, 0)),
    "intstr.IntOrString": _int_or_string,
    "runtime.RawExtension": _raw_json,
    "meta.v1.FieldsV1": _raw_json,
}


def decode_object(body: bytes, depth: int = 1) -> dict[str, Any]:
    """A `k8s\\0` + runtime.Unknown envelope → the object as JSON, with its apiVersion and kind."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope (no k8s\\0 prefix)")
    if depth == 1:
        _budget[0] = MAX_VALUES
    pos = len(MAGIC)
    api_version = kind = ""
    raw: tuple[int, int] | None = None
    unknown = plan("runtime.Unknown")
    while pos < len(body):
        tag, pos = _varint(body, pos, len(body))
        f = unknown.by_number.get(tag >> 3)
        if f is None or tag & 7 != _LEN:
            raise ProtobufError(f"wrong wireType {tag & 7} for field {tag >> 3} of Unknown" if f else
                                f"unknown field {tag >> 3} in message Unknown")
        n, start = _varint(body, pos, len(body))
        pos = start + n
        if pos > len(body):
            raise ProtobufError("unexpected EOF in a length-delimited field")
        if f.number == 1:
            meta = _raw_fields("runtime.TypeMeta", body, start, pos)
            api_version, kind = meta.get(1, ""), meta.get(2, "")
        elif f.number == 2:
            raw = (start, pos)
        elif f.number == 3 and n:
            raise ProtobufError(f'unsupported contentEncoding "{body[start:pos][:64]!r}"')
    key = message_for(api_version, kind)
    if key is None:
        raise UnknownKind(api_version, kind)
    obj = decode_message(key, body, *raw, depth=depth) if raw else decode_message(key, b"", depth=depth)
    return {"apiVersion": api_version, "kind": kind, **obj}


# --- encoding ------------------------------------------------------------------------------------------------------


def encode_message(key: str, value: Any, depth: int = 1) -> bytes:
    """The wire form of `value` as message `key` (EncodeError for anything it cannot carry)."""
    if depth > MAX_DEPTH:
        raise EncodeError(f"exceeded max depth {MAX_DEPTH}")
    special = _SPECIAL_ENCODERS.get(key)
    if special is not None:
        return special(value)
    if key in LISTS:
        if type(value) is not list:
            raise EncodeError(f"{_short(key)}: expected a list")
        element = plan(key).by_number[1]
        return b"".join(element.tag + _encode_string(v, element, depth) for v in value)
    if type(value) is not dict:
        raise EncodeError(f"{_short(key)}: expected an object, got {value!r:.40}")
    p = plan(key)
    parts: list[bytes] = []
    append = parts.append
    inlined: dict[Field, dict[str, Any]] | None = None
    by_name = p.by_name
    for name, item in value.items():
        f = by_name.get(name)
        if f is None:
            if (name in _TYPE_META and key in _KIND_MESSAGES) or _lenient[0]:
                continue  # TypeMeta travels in the envelope; a lenient encoding drops what Go would
            raise EncodeError(f'unknown field "{name}" for {_short(key)}')
        if item is None:
            continue
        mode = f.mode
        if mode == _PLAIN:
            append(f.tag)
            append(f.encode(item, f, depth))
        elif mode == _REPEATED:
            if type(item) is not list:
                raise EncodeError(f'field "{f.name}": expected a list')
            for element in item:
                append(f.tag)
                append(f.encode(element, f, depth))
        elif mode == _MAP:
            if type(item) is not dict:
                raise EncodeError(f'field "{f.name}": expected an object')
            key_field, value_field = p.entries[f.number]
            for k in sorted(item):
                v = item[k]
                if v is None and not f.message:
                    continue
                entry = key_field.tag + key_field.encode(k, key_field, depth) + \
                    value_field.tag + value_field.encode(v, value_field, depth)
                append(f.tag)
                append(_uvarint(len(entry)))
                append(entry)
        else:  # a JSON key of an inlined struct: collected, then encoded as that struct
            if inlined is None:
                inlined = {}
            inlined.setdefault(f, {})[name] = item
    for f in p.inline:  # non-pointer: always written, as gogo does
        append(f.tag)
        append(f.encode((inlined or {}).get(f, {}), f, depth))
    return b"".join(parts)


def _encode_time(value: Any) -> bytes:
    if type(value) is not str:
        raise EncodeError(f"expected an RFC 3339 time, got {value!r:.40}")
    try:
        seconds, nanos = wellknown.parse_time(value)
    except ValueError as exc:
        raise EncodeError(str(exc)) from None
    return b"\x08" + _uvarint(seconds & _MASK64) + (b"\x10" + _uvarint(nanos) if nanos else b"")


def _encode_quantity(value: Any) -> bytes:
    if type(value) in (int, float):
        value = str(value)  # a JSON number where a quantity belongs: the string Quantity would parse it from
    if type(value) is not str:
        raise EncodeError(f"expected a quantity, got {value!r:.40}")
    return _len_field(1, value.encode())


def _encode_int_or_string(value: Any) -> bytes:
    if type(value) is str:
        return b"\x08\x01" + _len_field(3, value.encode("utf-8", "surrogatepass"))
    if type(value) is not int or not _I32_RANGE[0] <= value <= _I32_RANGE[1]:
        raise EncodeError(f"expected an int32 or a string, got {value!r:.40}")
    return b"\x08\x00\x10" + _uvarint(value & _MASK64)


def _encode_duration(value: Any) -> bytes:
    if type(value) is not str:
        raise EncodeError(f"expected a duration string, got {value!r:.40}")
    try:
        return b"\x08" + _uvarint(parse_duration(value) & _MASK64)
    except ValueError as exc:
        raise EncodeError(str(exc)) from None


_SPECIAL_ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "resource.Quantity": _encode_quantity,
    "resource.QuantityValue": _encode_quantity,
    "meta.v1.Time": _encode_time,
    "meta.v1.MicroTime": _encode_time,
    "meta.v1.Duration": _encode_duration,
    "intstr.IntOrString": _encode_int_or_string,
    "runtime.RawExtension": lambda value: _len_field(1, orjson.dumps(value)),
    "meta.v1.FieldsV1": lambda value: _len_field(1, orjson.dumps(value)),
}


def encode_object(obj: dict[str, Any], lenient: bool = False) -> bytes:
    """An object with apiVersion and kind → `k8s\\0` + runtime.Unknown envelope (EncodeError if it has no message
    or holds something the message cannot carry). `lenient` leaves out JSON keys the message lacks, as a Go
    struct would drop them: for watch streams, which cannot fall back to JSON midway."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if type(api_version) is not str or type(kind) is not str or (key := message_for(api_version, kind)) is None:
        raise EncodeError(f"no protobuf message for kind {kind!r:.40} in {api_version!r:.40}")
    _lenient[0] = lenient
    try:
        raw = encode_message(key, obj)
    except (TypeError, OverflowError, orjson.JSONEncodeError) as exc:  # unsortable map keys, unserializable raw
        raise EncodeError(str(exc)) from None
    finally:
        _lenient[0] = False
    type_meta = _len_field(1, api_version.encode()) + _len_field(2, kind.encode())
    return MAGIC + _len_field(1, type_meta) + _len_field(2, raw) + b"\x1a\x00\x22\x00"


def encode_watch_event(event_type: str, raw_object: bytes) -> bytes:
    """A bare metav1.WatchEvent {type, object: RawExtension{raw}} around an already-enveloped object."""
    return _len_field(1, event_type.encode()) + _len_field(2, _len_field(1, raw_object))
