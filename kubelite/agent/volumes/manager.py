"""Setting up a pod's API-data volumes (configMap, secret, downwardAPI, projected) before and while it runs.

kubelet's volume manager mounts a pod's volumes before its containers start and its periodic
pod sync rewrites these kinds when their sources change. Here pod sync calls `set_up` on every
sync: it registers the objects the pod references with the object watcher (whose changes wake
the pod), waits for their first list, and projects each volume into
`<pod dir>/volumes/<name>` with the AtomicWriter (a no-op when nothing changed), with the modes and fsGroup
ownership a non-root container needs (ownership.py). A failure names
the volume with kubelet's words (`MountVolume.SetUp failed for volume "v" : configmap "x" not
found`); the containers then wait in ContainerCreating and the mount is retried.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kubelite.agent.volumes.atomic_writer import AtomicWriter, PayloadError
from kubelite.agent.volumes.objects import Ref, referenced_objects
from kubelite.agent.volumes.ownership import EMPTY_DIR_MODE, fs_group, make_volume_dir
from kubelite.agent.volumes.projection import MountError, payload

Obj = dict[str, Any]
API_DATA_KINDS = ("configMap", "secret", "downwardAPI", "projected")


def is_api_data(volume: Obj) -> bool:
    return any(k in volume for k in API_DATA_KINDS)


class ObjectSource(Protocol):
    """ConfigMaps and Secrets as the node sees them (objects.ObjectWatcher)."""

    def register(self, uid: str, refs: Iterable[Ref]) -> None: ...

    def unregister(self, uid: str) -> None: ...

    async def wait_synced(self, refs: Iterable[Ref]) -> None: ...

    def get(self, kind: str, namespace: str, name: str) -> Obj | None: ...


class TokenSource(Protocol):
    """Projected service account tokens (tokens.TokenManager)."""

    async def token(self, pod: Obj, source: Obj) -> tuple[str, float]: ...

    def forget(self, uid: str) -> None: ...


class VolumeManager:
    def __init__(self, objects: ObjectSource, tokens: TokenSource, host_ip: str,
                 allocatable: Mapping[str, str]) -> None:
        self.objects = objects
        self.tokens = tokens
        self.host_ip = host_ip
        self.allocatable = allocatable  # the node's, read live (downward API defaults for unset limits)

    async def set_up(self, pod: Obj, volume_dir: Path) -> float | None:
        """Project every API-data volume of `pod`; returns when a token in one must be refreshed (None: no token).

        Raises MountError for the first volume that cannot be set up."""
        refs = referenced_objects(pod)
        self.objects.register(pod["metadata"]["uid"], refs)
        await self.objects.wait_synced(refs)
        refresh: float | None = None
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if not is_api_data(volume):
                continue
            name = str(volume.get("name", ""))
            try:
                files, at = await payload(pod, volume, self.objects.get, self.host_ip, self.tokens.token,
                                          self.allocatable)
                target = volume_dir / name
                make_volume_dir(target, EMPTY_DIR_MODE)  # upstream wraps an emptyDir: 0777, as ownership.py says
                AtomicWriter(target, fs_group(pod)).write(files)
            except (MountError, PayloadError, OSError) as exc:
                raise MountError(f'MountVolume.SetUp failed for volume "{name}" : {exc}') from None
            if at is not None:
                refresh = at if refresh is None else min(refresh, at)
        return refresh

    def tear_down(self, uid: str) -> None:
        """The pod's containers have all stopped: stop watching its objects and drop its tokens."""
        self.objects.unregister(uid)
        self.tokens.forget(uid)
