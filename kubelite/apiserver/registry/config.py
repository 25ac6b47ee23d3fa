"""core/v1 ConfigMaps and Secrets: key names, the 1 MiB limit, `immutable`, Secret types.

Mirrors pkg/apis/core/validation (ValidateConfigMap, ValidateSecret and their Update forms),
pkg/apis/core/v1 (SetDefaults_Secret: type Opaque; the conversion that folds the write-only
`stringData` into `data`) and pkg/registry/core/{configmap,secret}/strategy.go. Secret values
travel base64-encoded in `data`; a value that is not valid base64 fails decoding (400) with the
Go decoder's words, as upstream's JSON codec does for a []byte field.

Secret types without required keys of their own (Opaque, bootstrap.kubernetes.io/token and any
user-defined type) are accepted as upstream accepts them: core validation checks nothing more.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from kubelite.api import errors
from kubelite.api import validation as v
from kubelite.api.errors import Cause
from kubelite.api.selectors import COMMON_FIELDS, path_getter
from kubelite.apiserver.registry.base import Lookup, Obj, Resource, Strategy

MAX_SECRET_SIZE = 1024 * 1024  # core.MaxSecretSize, also the ConfigMap limit
IMMUTABLE_MSG = "field is immutable when `immutable` is set"
REDACTED = "<secret contents redacted>"

SECRET_OPAQUE = "Opaque"
SECRET_SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SECRET_DOCKERCFG = "kubernetes.io/dockercfg"
SECRET_DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
SECRET_BASIC_AUTH = "kubernetes.io/basic-auth"
SECRET_SSH_AUTH = "kubernetes.io/ssh-auth"
SECRET_TLS = "kubernetes.io/tls"
SECRET_BOOTSTRAP_TOKEN = "bootstrap.kubernetes.io/token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"

_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                   "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def is_config_map_key(key: str) -> list[str]:
    """validation.IsConfigMapKey: the key becomes a file name in a volume, so '.', '..' and '..x' are refused."""
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.match(key):
        errs.append(_CONFIG_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def base64_error_offset(text: str) -> int | None:
    """Where Go's base64.StdEncoding rejects `text` (CorruptInputError's byte), or None when it decodes.

    Go skips CR and LF, reads quanta of four, allows '=' only as the last one or two characters of the
    last quantum, and reports an incomplete final quantum at the quantum's first byte."""
    chars = [(i, ch) for i, ch in enumerate(text) if ch not in "\r\n"]
    filled, quantum_start = 0, 0
    for n, (i, ch) in enumerate(chars):
        if filled == 0:
            quantum_start = i
        if ch == "=":
            if filled < 2:
                return i
            rest = chars[n + 1:]
            if filled == 2:  # "xx==": a second '=' must follow
                if not rest:
                    return len(text)
                if rest[0][1] != "=":
                    return rest[0][0]
                rest = rest[1:]
            return rest[0][0] if rest else None
        if ch not in _B64_ALPHABET:
            return i
        filled = (filled + 1) % 4
    return quantum_start if filled else None


def decode_data(kind: str, data: dict[str, object] | None, field: str = "data") -> dict[str, bytes]:
    """The decoded values of a base64 map (`data`, `binaryData`); 400 with the decoder's message on bad base64."""
    out: dict[str, bytes] = {}
    for key, value in (data or {}).items():
        text = value if isinstance(value, str) else ""
        offset = base64_error_offset(text)
        if offset is not None:
            raise errors.cannot_decode(kind, "v1", Cause("FieldValueInvalid",
                                                         f"illegal base64 data at input byte {offset}",
                                                         f"{field}[{key}]"))
        try:
            out[key] = base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
        except binascii.Error:  # pragma: no cover - base64_error_offset accepted only decodable text
            raise errors.cannot_decode(kind, "v1", Cause("FieldValueInvalid", "illegal base64 data",
                                                         f"{field}[{key}]")) from None
    return out


def _go_json_error(raw: bytes) -> str | None:
    """Whether `raw` unmarshals into a Go map[string]interface{}, and if not, roughly encoding/json's words."""
    try:
        parsed = json.loads(raw)
    except UnicodeDecodeError:
        return "invalid character looking for beginning of value"
    except json.JSONDecodeError as e:
        if not raw.strip() or e.pos >= len(raw.decode(errors="replace")):
            return "unexpected end of JSON input"
        return f"invalid character '{raw.decode(errors='replace')[e.pos]}' looking for beginning of value"
    if not isinstance(parsed, dict):
        return f"json: cannot unmarshal {type(parsed).__name__} into Go value of type map[string]interface {{}}"
    return None


def _key_causes(field: str, keys: list[str]) -> list[Cause]:
    return [v.invalid(f"{field}[{key}]", key, msg) for key in keys for msg in is_config_map_key(key)]


def _too_long(path: str) -> Cause:
    return Cause("FieldValueTooLong", f"Too long: may not be more than {MAX_SECRET_SIZE} bytes", path)


def _immutable_causes(new: Obj, old: Obj, fields: tuple[str, ...]) -> list[Cause]:
    """Once `immutable: true` is stored, neither it nor the data may change (ValidateConfigMapUpdate)."""
    if not old.get("immutable"):
        return []
    causes = []
    if not new.get("immutable"):
        causes.append(v.forbidden("immutable", IMMUTABLE_MSG))
    for field in fields:
        if (new.get(field) or {}) != (old.get(field) or {}):
            causes.append(v.forbidden(field, IMMUTABLE_MSG))
    return causes


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        causes += _key_causes("data", list(data))
        causes += [v.invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
                   for key in data if key in binary]
        causes += _key_causes("binaryData", list(binary))
        size = sum(len(str(value).encode()) for value in data.values())
        size += sum(len(raw) for raw in decode_data("ConfigMap", binary, "binaryData").values())  # bad base64: 400
        if size > MAX_SECRET_SIZE:
            causes.append(_too_long(""))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        return _immutable_causes(new, old, ("data", "binaryData")) + self.validate(new)


def fold_string_data(obj: Obj) -> None:
    """The v1 conversion: `stringData` is write-only; each entry overwrites the same key of `data`."""
    strings = obj.pop("stringData", None) or {}
    if strings:
        data = obj.setdefault("data", {})
        for key, value in strings.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _validate_secret_type(obj: Obj, data: dict[str, bytes]) -> list[Cause]:
    kind = obj.get("type")
    if kind == SECRET_SERVICE_ACCOUNT_TOKEN:
        if not (obj["metadata"].get("annotations") or {}).get(SERVICE_ACCOUNT_NAME_KEY):
            return [v.required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]")]
    elif kind in (SECRET_DOCKERCFG, SECRET_DOCKER_CONFIG_JSON):
        key = ".dockercfg" if kind == SECRET_DOCKERCFG else ".dockerconfigjson"
        if key not in data:
            return [v.required(f"data[{key}]")]
        problem = _go_json_error(data[key])
        if problem is not None:
            return [v.invalid(f"data[{key}]", REDACTED, problem)]
    elif kind == SECRET_BASIC_AUTH:
        if "username" not in data and "password" not in data:
            return [v.required("data[username]"), v.required("data[password]")]
    elif kind == SECRET_SSH_AUTH:
        if not data.get("ssh-privatekey"):
            return [v.required("data[ssh-privatekey]")]
    elif kind == SECRET_TLS:
        return [v.required(f"data[{key}]") for key in ("tls.crt", "tls.key") if key not in data]
    return []


class SecretStrategy(Strategy):
    def prepare_create(self, obj: Obj, lookup: Lookup) -> None:
        super().prepare_create(obj, lookup)
        fold_string_data(obj)
        if not obj.get("type"):
            obj["type"] = SECRET_OPAQUE

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        fold_string_data(new)
        if not new.get("type"):
            new["type"] = SECRET_OPAQUE

    def validate(self, obj: Obj) -> list[Cause]:
        causes = super().validate(obj)
        data = decode_data("Secret", obj.get("data"))
        causes += _key_causes("data", list(data))
        if sum(len(raw) for raw in data.values()) > MAX_SECRET_SIZE:
            causes.append(_too_long("data"))
        return causes + _validate_secret_type(obj, data)

    def validate_update(self, new: Obj, old: Obj) -> list[Cause]:
        causes = []
        if new.get("type") != old.get("type"):
            causes.append(v.invalid("type", new.get("type"), "field is immutable"))
        return causes + _immutable_causes(new, old, ("data",)) + self.validate(new)


CONFIG_MAPS = Resource("", "v1", "configmaps", "configmap", "ConfigMap", True, "V1ConfigMap", short_names=("cm",))
SECRETS = Resource("", "v1", "secrets", "secret", "Secret", True, "V1Secret",
                   fields={**COMMON_FIELDS, "type": path_getter("type")})
