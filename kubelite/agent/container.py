"""What to execute for a container: argv with upstream's $(VAR) expansion, and its environment.

The image is never pulled: a node-level catalog maps image names to an entrypoint when
the manifest gives no `command`; any `…/pause:…` image runs a built-in pause process.
"""

from __future__ import annotations

import re
from typing import Any

from kubelite.agent.service_env import with_service_links
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
    env = with_service_links(pod, base)
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
