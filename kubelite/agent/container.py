"""What to execute for a container: argv with upstream's $(VAR) expansion, and its environment.

The image is never pulled: a node-level catalog maps image names to an entrypoint when
the manifest gives no `command`; any `…/pause:…` image runs a built-in pause process.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from kubelite.api.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
PAUSE = ["sleep", "infinity"]  # pause: waits for a signal, ends on the stop signal
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ConfigError(Exception):
    """CreateContainerConfigError: the container cannot be started as specified."""


def expand(text: str, env: dict[str, str]) -> str:
    """k8s.io/kubernetes/third_party/forked/golang/expansion: $(VAR) → value, $$ → $, unknown kept."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR.sub(sub, text)


def _field(pod: Obj, path: str, host_ip: str) -> str:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    m = re.match(r"metadata\.(labels|annotations)\['(.+)'\]$", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": host_ip,
              "status.podIP": host_ip}
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef {path!r}")
    return str(simple[path] or "")


def _resource(container: Obj, ref: Obj) -> str:
    kind, _, name = ref.get("resource", "").partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        return "0"
    try:
        q = parse_quantity(value) / parse_quantity(ref.get("divisor") or 1)
    except QuantityError as exc:
        raise ConfigError(str(exc)) from None
    return str(-(-q.numerator // q.denominator))


def environment(pod: Obj, container: Obj, host_ip: str, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    for item in container.get("env") or []:
        name = item.get("name", "")
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
            continue
        source = item.get("valueFrom") or {}
        if "fieldRef" in source:
            env[name] = _field(pod, source["fieldRef"].get("fieldPath", ""), host_ip)
        elif "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            target = next((c for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers")
                                                                               or [])
                           if c["name"] == ref.get("containerName", container["name"])), container)
            env[name] = _resource(target, ref)
        else:
            raise ConfigError(f"env {name}: only value, fieldRef and resourceFieldRef are supported")
    return env


# Base images whose entrypoint is empty and whose default command is a shell: `args` are the command,
# as with a container runtime (e.g. `kubectl run x --image=busybox -- sh -c '…'`).
SHELL_IMAGES = ("busybox", "alpine", "ubuntu", "debian")


def _shell_image(image: str) -> bool:
    name = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return name in SHELL_IMAGES


def is_pause(image: str) -> bool:
    name = image.rsplit("/", 1)[-1]
    return name == "pause" or name.startswith("pause:") or name.startswith("pause@")


def sandboxed(command: list[str], pod: Obj, container: Obj, volume_root: Path) -> list[str]:
    """Wrap `command` in a bubblewrap mount namespace that mounts the container's volumes.

    The container sees the host's filesystem with each volume bound at its mountPath:
    emptyDir volumes are per-pod directories under `volume_root` (shared by the pod's
    containers), hostPath volumes are host paths. Without bubblewrap, or for other volume
    types, the container is refused (CreateContainerConfigError) rather than run without
    its files.
    """
    mounts = container.get("volumeMounts") or []
    if not mounts:
        return command
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ConfigError("volumeMounts need the bubblewrap sandbox (bwrap), which is not installed on this node")
    volumes = {v.get("name"): v for v in pod["spec"].get("volumes") or []}
    binds: list[str] = []
    for m in mounts:
        vol = volumes.get(m.get("name"))
        if vol is None:
            raise ConfigError(f'volumeMount "{m.get("name")}" names no volume of the pod')
        if "emptyDir" in vol:
            source = volume_root / vol["name"]
            source.mkdir(parents=True, exist_ok=True)
        elif "hostPath" in vol:
            host = vol["hostPath"] or {}
            source = Path(host.get("path", ""))
            kind = host.get("type") or ""
            if kind == "DirectoryOrCreate":
                source.mkdir(parents=True, exist_ok=True)
            elif kind == "FileOrCreate" and not source.exists():
                source.parent.mkdir(parents=True, exist_ok=True)
                source.touch()
            if not source.exists():
                raise ConfigError(f"hostPath {source} does not exist")
        else:
            kinds = ", ".join(k for k in vol if k != "name")
            raise ConfigError(f'volume "{vol["name"]}" of type {kinds} is not supported (emptyDir and hostPath are)')
        if m.get("subPath"):
            source = source / m["subPath"]
            source.mkdir(parents=True, exist_ok=True)
        binds += ["--ro-bind" if m.get("readOnly") else "--bind", str(source), str(m.get("mountPath", ""))]
    return [bwrap, "--dev-bind", "/", "/", *binds, "--", *command]


def argv(container: Obj, env: dict[str, str], catalog: dict[str, list[str]]) -> list[str]:
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    if not command:
        image = container.get("image", "")
        entry = catalog.get(image) or catalog.get(image.rsplit(":", 1)[0])
        if entry is None and is_pause(image):
            entry = PAUSE
        if entry is None and _shell_image(image):
            entry = [] if args else ["sh"]
        if entry is None:
            raise ConfigError(f'image "{image}" has no known entrypoint and the container gives no command')
        command = list(entry)
    return [expand(a, env) for a in command + args]
