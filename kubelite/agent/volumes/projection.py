"""What a configMap, secret, downwardAPI or projected volume holds: kubelet's MakePayload functions.

Mirrors pkg/volume/{configmap,secret,downwardapi,projected}: without `items` every key becomes a
file; with `items` only the listed keys, at their paths, and a listed key that is missing fails
the mount unless the source is optional. Modes: the item's `mode`, else the volume's
`defaultMode`, else 0644 (a service account token may be 0600 and the pod user's: `_token_file`).
A missing object fails the mount with the manager's NotFound words (`configmap "x" not found`)
unless optional, when the volume is empty. Downward API files hold
one field each; `metadata.labels` / `metadata.annotations` as sorted `key="value"` lines.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubelite.agent.container import ConfigError, ObjectLookup, field_value, find_container, resource_value
from kubelite.agent.volumes.atomic_writer import FileProjection
from kubelite.agent.volumes.ownership import fs_group, fs_user
from kubelite.api.validation import go_quote

Obj = dict[str, Any]
DEFAULT_MODE = 0o644
DEFAULT_TOKEN_EXPIRATION = 3600  # ServiceAccountTokenProjection.expirationSeconds' API default

# A serviceAccountToken source's token and when to ask for a new one: (pod, source) → (token, refresh at).
TokenFetch = Callable[[Obj, Obj], Awaitable[tuple[str, float]]]


class MountError(Exception):
    """MountVolume.SetUp failed: the pod's containers wait (ContainerCreating) and the mount is retried."""


def format_map(m: Obj) -> str:
    """fieldpath.FormatMap: `key="value"` lines in key order, no trailing newline."""
    return "\n".join(f"{k}={go_quote(str(m[k]))}" for k in sorted(m))


def _object_payload(kind: str, obj: Obj | None, items: list[Obj] | None, default_mode: int,
                    optional: bool) -> dict[str, FileProjection]:
    """configmap.MakePayload / secret.MakePayload."""
    values: dict[str, bytes] = {}
    if obj is not None:
        if kind == "secret":
            values = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        else:
            values = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
            values.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    if not items:
        return {k: FileProjection(v, default_mode) for k, v in values.items()}
    out = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in values:
            if optional:
                continue
            what = "config" if kind == "configmap" else "secret"
            raise MountError(f"{kind} references non-existent {what} key: {key}")
        mode = item.get("mode")
        out[str(item.get("path", key))] = FileProjection(values[key], default_mode if mode is None else int(mode))
    return out


def _fetch(lookup: ObjectLookup, kind: str, namespace: str, name: str, optional: bool) -> Obj | None:
    try:
        obj = lookup(kind, namespace, name)
    except ConfigError as exc:
        raise MountError(str(exc)) from None
    if obj is None and not optional:
        raise MountError(f'{kind} "{name}" not found')
    return obj


def object_source(pod: Obj, kind: str, source: Obj, lookup: ObjectLookup,
                  default_mode: int) -> dict[str, FileProjection]:
    """A configMap or secret volume, or the same source inside a projected volume."""
    name = str(source.get("secretName" if kind == "secret" and "secretName" in source else "name", ""))
    optional = bool(source.get("optional"))
    obj = _fetch(lookup, kind, pod["metadata"].get("namespace", ""), name, optional)
    return _object_payload(kind, obj, source.get("items"), default_mode, optional)


def downward_api(pod: Obj, items: list[Obj], host_ip: str, default_mode: int,
                 allocatable: Mapping[str, str]) -> dict[str, FileProjection]:
    """downwardapi.CollectData: each item's fieldRef or resourceFieldRef (which must name its container)."""
    out = {}
    for item in items:
        try:
            if item.get("fieldRef"):
                path = str(item["fieldRef"].get("fieldPath", ""))
                if path in ("metadata.labels", "metadata.annotations"):
                    text = format_map(pod["metadata"].get(path.split(".")[1]) or {})
                else:
                    text = field_value(pod, path, host_ip)
            else:
                ref = item.get("resourceFieldRef") or {}
                container = find_container(pod, str(ref.get("containerName", "")))
                if container is None:
                    raise ConfigError(f"container {ref.get('containerName')!r} not found for resourceFieldRef")
                text = resource_value(container, ref, allocatable)
        except ConfigError as exc:
            raise MountError(f"error while mapping volume {item.get('path')}: {exc}") from None
        mode = item.get("mode")
        out[str(item.get("path", ""))] = FileProjection(text.encode(), default_mode if mode is None else int(mode))
    return out


def _token_file(pod: Obj, token: str, default_mode: int) -> FileProjection:
    """projected.collectData's token: owned by the user all the pod's containers run as (FsUserFrom) and then, or
    with an fsGroup (whose ownership makes it 0640), mode 0600 — readable by the pod's user, whatever defaultMode."""
    user, group = fs_user(pod), fs_group(pod)
    return FileProjection(token.encode(), 0o600 if user is not None or group is not None else default_mode, user)


async def payload(pod: Obj, volume: Obj, lookup: ObjectLookup, host_ip: str, token: TokenFetch,
                  allocatable: Mapping[str, str]) -> tuple[dict[str, FileProjection], float | None]:
    """The files of one API-data volume, and when a projected token in it must be refreshed (None: never);
    `allocatable`, the node's: what a downward API item reads for a limit its container leaves unset."""
    if "configMap" in volume or "secret" in volume:
        kind = "configmap" if "configMap" in volume else "secret"
        source = volume.get("configMap") or volume.get("secret") or {}
        mode = source.get("defaultMode")
        return object_source(pod, kind, source, lookup, DEFAULT_MODE if mode is None else int(mode)), None
    if "downwardAPI" in volume:
        source = volume["downwardAPI"] or {}
        mode = source.get("defaultMode")
        return downward_api(pod, source.get("items") or [], host_ip, DEFAULT_MODE if mode is None else int(mode),
                            allocatable), None
    projected = volume.get("projected") or {}
    mode = projected.get("defaultMode")
    default_mode = DEFAULT_MODE if mode is None else int(mode)
    out: dict[str, FileProjection] = {}
    refresh: float | None = None
    errors = []
    for source in projected.get("sources") or []:  # projected.collectData: every source, errors gathered
        try:
            if source.get("configMap"):
                out.update(object_source(pod, "configmap", source["configMap"], lookup, default_mode))
            elif source.get("secret"):
                out.update(object_source(pod, "secret", source["secret"], lookup, default_mode))
            elif source.get("downwardAPI"):
                out.update(downward_api(pod, source["downwardAPI"].get("items") or [], host_ip, default_mode,
                                        allocatable))
            elif source.get("serviceAccountToken"):
                text, at = await token(pod, source["serviceAccountToken"])
                out[str(source["serviceAccountToken"].get("path", "token"))] = _token_file(pod, text, default_mode)
                refresh = at if refresh is None else min(refresh, at)
            else:
                errors.append(f"unsupported projected source {', '.join(source)}")
        except MountError as exc:
            errors.append(str(exc))
    if errors:
        raise MountError("; ".join(errors))
    return out, refresh
