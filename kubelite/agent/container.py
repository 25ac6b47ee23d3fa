"""What to execute for a container: argv with upstream's $(VAR) expansion, and its environment.

The image is never pulled: a node-level catalog maps image names to an entrypoint when
the manifest gives no `command`; any `…/pause:…` image runs a built-in pause process.
"""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any

from kubelite.agent.service_env import with_service_links
from kubelite.api.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
PAUSE = ["sleep", "infinity"]  # pause: waits for a signal, ends on the stop signal
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
HOSTNAME_MAX_LEN = 63  # truncatePodHostnameIfNeeded's cap (a DNS label)
FQDN_MAX_LEN = 64  # GetNodenameForKernel's: the Linux nodename field (65 bytes with the terminating NUL)
# the node's clusterDomain when its config names none: what every cluster sets (kubeadm, kind, k3s) and what
# kubelite's service-account issuer says (kubernetes.default.svc.cluster.local)
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ConfigError(Exception):
    """CreateContainerConfigError: the container cannot be started as specified."""


class SandboxError(ConfigError):
    """The pod's sandbox cannot be configured (kuberuntime's generatePodSandboxConfig failed): no container of
    the pod starts, they wait as ContainerCreating, and a FailedCreatePodSandBox event says why."""


def expand(text: str, env: dict[str, str]) -> str:
    """k8s.io/kubernetes/third_party/forked/golang/expansion: $(VAR) → value, $$ → $, unknown kept."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR.sub(sub, text)


def field_value(pod: Obj, path: str, host_ip: str) -> str:
    """A downward API fieldRef (env and volumes share it; volumes add the whole-map forms themselves)."""
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


# MergeContainerResourceLimits: the limits an unset (or zero) one defaults to the node's allocatable for
# (hugepages never: they are not overcommitted)
DEFAULTED_LIMITS = ("cpu", "memory", "ephemeral-storage")


def resource_value(container: Obj, ref: Obj, allocatable: Mapping[str, str]) -> str:
    """A downward API resourceFieldRef (env and volumes share it): ExtractContainerResourceValue of the container
    with its unset cpu, memory and ephemeral-storage limits the node's allocatable (kubelet's
    defaultPodLimitsForDownwardAPI, the volume plugin's ExtractResourceValueByContainerNameAndNodeAllocatable):
    a container with no memory limit reads the node's memory, not 0. An unset request is 0."""
    kind, _, name = ref.get("resource", "").partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if kind == "limits" and name in DEFAULTED_LIMITS and _unset(value):
        value = allocatable.get(name, value)
    if value is None:
        return "0"
    try:
        q = parse_quantity(value) / parse_quantity(ref.get("divisor") or 1)
    except QuantityError as exc:
        raise ConfigError(str(exc)) from None
    return str(-(-q.numerator // q.denominator))


def _unset(value: Any) -> bool:
    try:
        return value is None or parse_quantity(value) == 0
    except QuantityError:
        return False  # not a quantity: reported as such where it is read


def find_container(pod: Obj, name: str) -> Obj | None:
    spec = pod.get("spec") or {}
    return next((c for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
                 if c.get("name") == name), None)


# Reads a ConfigMap ("configmap") or Secret ("secret") by namespace and name: None when it does not
# exist; ConfigError when it cannot be known yet (the node's object cache has not synced).
ObjectLookup = Callable[[str, str, str], Obj | None]
Warn = Callable[[str, str], None]  # an event's reason and message


def _no_objects(kind: str, namespace: str, name: str) -> Obj | None:
    raise ConfigError(f"failed to sync {kind} cache: timed out waiting for the condition")


def is_env_var_name(name: str) -> bool:
    """validation.IsEnvVarName."""
    return bool(_ENV_NAME.match(name))


def _object_values(kind: str, obj: Obj) -> dict[str, str]:
    """A ConfigMap's `data`, or a Secret's `data` decoded, as strings (kubelet converts the bytes the same way)."""
    if kind == "secret":
        return {k: base64.b64decode(v).decode(errors="surrogateescape") for k, v in (obj.get("data") or {}).items()}
    return {k: str(v) for k, v in (obj.get("data") or {}).items()}


def _required(lookup: ObjectLookup, kind: str, namespace: str, name: str, optional: bool) -> Obj | None:
    """The object, None when it is missing and optional, else the manager's NotFound words."""
    obj = lookup(kind, namespace, name)
    if obj is None and not optional:
        raise ConfigError(f'{kind} "{name}" not found')
    return obj


def _env_from(pod: Obj, container: Obj, lookup: ObjectLookup, warn: Warn | None) -> dict[str, str]:
    """envFrom in order: each source's keys (with its prefix); names that are not valid are skipped with an event."""
    namespace = pod["metadata"].get("namespace", "")
    out: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        kind, ref = ("configmap", source.get("configMapRef")) if source.get("configMapRef") else \
            ("secret", source.get("secretRef") or {})
        obj = _required(lookup, kind, namespace, str(ref.get("name", "")), bool(ref.get("optional")))
        if obj is None:
            continue
        invalid = []
        for key, value in _object_values(kind, obj).items():
            name = str(source.get("prefix") or "") + key
            if not is_env_var_name(name):
                invalid.append(name)
                continue
            out[name] = value
        if invalid and warn is not None:
            label = "configMap" if kind == "configmap" else "secret"
            warn("InvalidEnvironmentVariableNames",
                 f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {label} {namespace}/{ref.get('name')} were "
                 "skipped since they are considered invalid environment variable names.")
    return out


def _key_ref(pod: Obj, kind: str, ref: Obj, lookup: ObjectLookup) -> str | None:
    """A configMapKeyRef / secretKeyRef: the value, None when optional and missing (the variable is left out)."""
    namespace, name, key = pod["metadata"].get("namespace", ""), str(ref.get("name", "")), str(ref.get("key", ""))
    optional = bool(ref.get("optional"))
    obj = _required(lookup, kind, namespace, name, optional)
    if obj is None:
        return None
    values = _object_values(kind, obj)
    if key not in values:
        if optional:
            return None
        label = "ConfigMap" if kind == "configmap" else "Secret"
        raise ConfigError(f"couldn't find key {key} in {label} {namespace}/{name}")
    return values[key]


def pod_hostname(pod: Obj, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """The pod's hostname as kubelet gives it to the runtime's sandbox (GeneratePodHostNameAndDomain and
    truncatePodHostnameIfNeeded): spec.hostname, else the pod's name, cut to 63 characters with no trailing '-' or
    '.'; with `setHostnameAsFQDN` and a subdomain, its FQDN (GetNodenameForKernel: SandboxError when longer than
    64 characters). A hostNetwork pod gets none, so containerd uses the node's own. (kubelet also checks that
    spec.hostname and spec.subdomain are DNS labels; the API server has refused any that is not.)"""
    spec = pod.get("spec") or {}
    if spec.get("hostNetwork"):
        return socket.gethostname()
    name = str(spec.get("hostname") or pod["metadata"].get("name", ""))
    name = name[:HOSTNAME_MAX_LEN].rstrip("-.") if len(name) > HOSTNAME_MAX_LEN else name
    subdomain = spec.get("subdomain")
    domain = f"{subdomain}.{pod['metadata'].get('namespace')}.svc.{cluster_domain}" if subdomain else ""
    return nodename_for_kernel(name, domain, bool(spec.get("setHostnameAsFQDN")))


def nodename_for_kernel(hostname: str, host_domain: str, set_hostname_as_fqdn: bool) -> str:
    """kubelet's GetNodenameForKernel: the FQDN `hostname.host_domain` when asked for and there is a domain (it must
    fit the kernel's nodename), else the hostname."""
    if not host_domain or not set_hostname_as_fqdn:
        return hostname
    fqdn = f"{hostname}.{host_domain}"
    if len(fqdn) > FQDN_MAX_LEN:
        raise SandboxError(f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long "
                           f"({FQDN_MAX_LEN} characters is the max, {len(fqdn)} characters requested)")
    return fqdn


def environment(pod: Obj, container: Obj, host_ip: str, base: dict[str, str], allocatable: Mapping[str, str],
                lookup: ObjectLookup = _no_objects, warn: Warn | None = None,
                cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> dict[str, str]:
    """containerd's HOSTNAME (the pod's hostname), then kubelet's makeEnvironmentVariables: the node's base, then
    envFrom, then env in order ($(VAR) expands to what is defined before it), each free to override what came
    before. A missing required object or key is a ConfigError with kubelet's words (CreateContainerConfigError);
    `warn` receives the events about skipped envFrom keys."""
    env = {"HOSTNAME": pod_hostname(pod, cluster_domain), **with_service_links(pod, base)}
    env.update(_env_from(pod, container, lookup, warn))
    for item in container.get("env") or []:
        name = item.get("name", "")
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
            continue
        source = item.get("valueFrom") or {}
        value: str | None
        if "fieldRef" in source:
            value = field_value(pod, source["fieldRef"].get("fieldPath", ""), host_ip)
        elif "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            value = resource_value(find_container(pod, ref.get("containerName") or container["name"]) or container,
                                   ref, allocatable)
        elif "configMapKeyRef" in source:
            value = _key_ref(pod, "configmap", source["configMapKeyRef"], lookup)
        elif "secretKeyRef" in source:
            value = _key_ref(pod, "secret", source["secretKeyRef"], lookup)
        else:
            raise ConfigError(f"env {name}: no value and no known valueFrom source")
        if value is not None:
            env[name] = value
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
