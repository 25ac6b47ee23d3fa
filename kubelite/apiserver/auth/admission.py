"""ServiceAccount admission (plugin/pkg/admission/serviceaccount) for pods being created.

Defaults `serviceAccountName` to `default`, refuses a pod whose service account does not exist
(upstream's message), and unless `automountServiceAccountToken` (the pod's, else the service
account's) is false, adds the projected `kube-api-access-XXXXX` volume (a bound token that
expires in 3607 s, the `kube-root-ca.crt` ConfigMap's ca.crt, the namespace from the downward API)
and mounts it read-only at /var/run/secrets/kubernetes.io/serviceaccount in every container that
does not already mount something there. A pod without imagePullSecrets gets the account's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kubelite.apiserver.auth.serviceaccount import WARN_ONLY_BOUND_TOKEN_EXPIRATION
from kubelite.apiserver.registry.base import Lookup, Obj
from kubelite.clock import Clock

DEFAULT_SERVICE_ACCOUNT = "default"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
PROJECTED_DEFAULT_MODE = 0o644  # corev1.ProjectedVolumeSourceDefaultMode, set explicitly as upstream (#104464)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # utilrand.String's alphabet
# A pod create waits up to DEFAULT_WAIT_POLLS x POLL (1 s) for a new namespace's `default` account (upstream: 10 tries)
DEFAULT_WAIT_POLLS = 10
POLL = 0.1


def token_volume_source() -> Obj:
    return {"defaultMode": PROJECTED_DEFAULT_MODE, "sources": [
        {"serviceAccountToken": {"expirationSeconds": WARN_ONLY_BOUND_TOKEN_EXPIRATION, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}


def should_automount(sa: Obj, pod: Obj) -> bool:
    pod_says = pod["spec"].get("automountServiceAccountToken")
    if pod_says is not None:
        return bool(pod_says)
    sa_says = sa.get("automountServiceAccountToken")
    return True if sa_says is None else bool(sa_says)


@dataclass
class ServiceAccountAdmission:
    mount_tokens: bool = True
    rng: random.Random = field(default_factory=lambda: random.Random(random.getrandbits(64)))  # uniqueness,
    # not secrecy, is what volume names need; from the process's generator, which a simulation seeds

    def admit(self, pod: Obj, lookup: Lookup) -> list[str]:
        """Mutate a pod being created; the refusals (403) when its service account does not exist."""
        spec = pod["spec"]
        namespace = pod["metadata"]["namespace"]
        name = spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        sa = lookup.get("serviceaccounts", namespace, name)
        if sa is None:
            return [f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found']
        if self.mount_tokens and should_automount(sa, pod):
            self._mount_token(spec)
        if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in sa["imagePullSecrets"]]
        return []

    def _mount_token(self, spec: Obj) -> None:
        volumes = spec.get("volumes") or []
        existing = next((v["name"] for v in volumes if v.get("name", "").startswith(TOKEN_VOLUME_PREFIX)), None)
        volume_name = existing or TOKEN_VOLUME_PREFIX + "".join(self.rng.choices(_NAME_CHARS, k=5))
        needs_volume = False
        for kind in ("initContainers", "containers"):
            for container in spec.get(kind) or []:
                mounts = container.setdefault("volumeMounts", [])
                if any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                    continue
                mounts.append({"name": volume_name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH})
                needs_volume = True
        if existing is None and needs_volume:
            spec["volumes"] = [*volumes, {"name": volume_name, "projected": token_volume_source()}]

    @staticmethod
    async def await_default(lookup: Lookup, clock: Clock, namespace: str) -> None:
        """Give the serviceaccount controller a moment to create a new namespace's `default` account before a pod
        create is refused for want of it, as upstream's admission retries its lookup of `default`."""
        for _ in range(DEFAULT_WAIT_POLLS):
            if lookup.get("namespaces", "", namespace) is None \
                    or lookup.get("serviceaccounts", namespace, DEFAULT_SERVICE_ACCOUNT) is not None:
                return
            await clock.sleep(POLL)
