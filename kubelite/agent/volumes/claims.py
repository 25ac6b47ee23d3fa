"""PersistentVolumeClaim volumes on the node: wait for the attachment, then "mount" (S5).

Before a pod's containers start, `ClaimVolumes.prepare` resolves each claim to its bound volume
and the volume to a directory on this node, and refuses to go on unless the volume may be used
here:
- a ReadWriteOnce/ReadWriteOncePod volume needs its VolumeAttachment (`kubelite-<pv>`) to name
  *this* node with `status.attached: true` — an attachment to another node is never mounted;
- a volume with node affinity (local-path) must admit this node.
Reading the claim, the volume and the attachment from the API each time (not a cache) is what
makes the check as fresh as the decision it guards.

The directory: `kubelite.io/local-path` volumes live under this agent's data dir
(`volumes/local-path/<pv>`), `kubelite.io/shared-path` ones at their `volumeAttributes.path`,
hostPath/local ones at their path (which must exist, and lie outside the node's protected
directories). Directories of kubelite's own drivers are created here on first mount, 0777
(provisioning on first use; see controllers/provisioner.py). "Mounting" places a
symlink `<pod dir>/volumes/<volume name>` to the directory, which the sandbox binds at each
mountPath (sandbox.py); a volume whose checks fail has its symlink removed.

Reclaim policy Delete of a local-path volume (`reclaim`): the provisioner lists the PVs whose
directories to delete on this Node; the agent deletes each one no pod of this node links to, and
lists those done on the Node in answer (controllers/provisioner.py has the other half).
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubelite.agent.volumes.ownership import fs_group, fs_group_change_policy, make_volume_dir, set_volume_ownership
from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.client.http import resource_path
from kubelite.client.interface import Client

log = logging.getLogger("kubelite.agent.volumes")
# A directory kubelite's drivers make on first mount: writable by any pod's user, as rancher's local-path
# provisioner makes its volumes (`mkdir -m 0777`), whatever the agent's umask.
PROVISIONED_MODE = 0o777

Obj = dict[str, Any]
LOCAL_PATH_DIR = Path("volumes") / "local-path"
PV_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")  # a DNS subdomain: no "/", never "." or ".."


class NotReady(Exception):
    """A claim volume cannot be used yet; the message says why (shown as the container's waiting message)."""


def volume_directory(pv: Obj, data_dir: Path) -> Path:
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    if csi.get("driver") == vu.LOCAL_PATH:
        return data_dir / LOCAL_PATH_DIR / str(pv["metadata"]["name"])
    if csi.get("driver") == vu.SHARED_PATH and (csi.get("volumeAttributes") or {}).get("path"):
        return Path(str(csi["volumeAttributes"]["path"]))
    for kind in ("hostPath", "local"):
        if (spec.get(kind) or {}).get("path"):
            return Path(spec[kind]["path"])
    raise NotReady(f"volume {pv['metadata']['name']} has a source this node cannot mount "
                   "(kubelite.io/local-path, kubelite.io/shared-path, hostPath and local are supported)")


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


class ClaimVolumes:
    def __init__(self, client: Client, node_name: str, data_dir: Path, protected: Sequence[Path] = ()) -> None:
        self.client = client
        self.node_name = node_name
        self.data_dir = data_dir
        self.protected = [p.resolve() for p in protected]  # never mounted: the node's credentials and state

    async def _get(self, path: str, what: str) -> Obj:
        try:
            return await self.client.get(path)
        except ApiError as exc:
            if exc.code == 404:
                raise NotReady(f"{what} not found") from None
            raise NotReady(f"reading {what}: {exc}") from None

    async def directory(self, namespace: str, claim_name: str) -> tuple[Path, Obj]:
        """The directory of the claim's volume and the volume, once it may be used on this node; else NotReady."""
        claim = await self._get(resource_path("persistentvolumeclaims", namespace, claim_name),
                                f'persistentvolumeclaim "{claim_name}"')
        pv_name = (claim.get("spec") or {}).get("volumeName")
        if not pv_name or (claim.get("status") or {}).get("phase") != "Bound":
            raise NotReady(f'persistentvolumeclaim "{claim_name}" is not bound')
        pv = await self._get(resource_path("persistentvolumes", name=pv_name), f'persistentvolume "{pv_name}"')
        if not vu.node_affinity_fits(pv, {vu.HOSTNAME_LABEL: self.node_name}, self.node_name):
            raise NotReady(f"volume {pv_name} has a node affinity that does not admit node {self.node_name}")
        if vu.needs_attach(pv):
            name = vu.attachment_name(pv_name)
            va = await self._get(resource_path("volumeattachments", name=name, group_version="storage.k8s.io/v1"),
                                 f'volumeattachment "{name}"')
            holder = (va.get("spec") or {}).get("nodeName")
            if holder != self.node_name:
                raise NotReady(f'Multi-Attach error for volume "{pv_name}" Volume is already exclusively attached '
                               f"to node {holder} and can't be attached to another")
            if not (va.get("status") or {}).get("attached"):
                raise NotReady(f'AttachVolume: volume "{pv_name}" is not attached to node {self.node_name} yet')
        directory = volume_directory(pv, self.data_dir)
        driver = ((pv.get("spec") or {}).get("csi") or {}).get("driver")
        if driver == vu.LOCAL_PATH:
            return directory, pv  # kubelite's own place under the data dir, bound from outside as emptyDirs are
        real = directory.resolve()
        for p in self.protected:
            if _inside(real, p):
                raise NotReady(f"volume {pv_name} at {directory} is inside {p}, which holds the node's credentials "
                               "and state and is never mounted into a container")
        if driver != vu.SHARED_PATH and not directory.is_dir():
            raise NotReady(f"volume {pv_name}: {directory} does not exist on node {self.node_name}")
        return directory, pv

    async def prepare(self, pod: Obj, volume_root: Path) -> str:
        """Mount every claim volume of the pod under `volume_root`; '' when all are ready, else why not."""
        ns = pod["metadata"].get("namespace", "")
        problems: list[str] = []
        for vol in pod["spec"].get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            link = volume_root / str(vol["name"])
            try:
                directory, pv = await self.directory(ns, claim)
                make_volume_dir(directory, PROVISIONED_MODE)
            except (NotReady, OSError) as exc:
                link.unlink(missing_ok=True)
                problems.append(f'volume "{vol["name"]}": {exc}')
                continue
            volume_root.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink() or link.readlink() != directory:
                link.unlink(missing_ok=True)
                link.symlink_to(directory)
                # the local plugin's SetUpAt, on the pod's mount: the pod's fsGroup with its fsGroupChangePolicy,
                # unless mounted read-only (ownership.py says why only `local` volumes)
                # (in a thread: a volume of a million files takes seconds, in which the loop would renew no Lease)
                if (pv.get("spec") or {}).get("local") and not vol["persistentVolumeClaim"].get("readOnly"):
                    await asyncio.to_thread(set_volume_ownership, directory, fs_group(pod), False,
                                            fs_group_change_policy(pod), self.protected)
        return "; ".join(problems)

    def _in_use(self) -> set[Path]:
        """The directories a pod of this node links to (its claim volumes)."""
        return {link.resolve() for link in (self.data_dir / "pods").glob("*/volumes/*") if link.is_symlink()}

    @staticmethod
    def asked(node: Obj) -> bool:
        """Whether `node` (as read) carries the reclaim's annotations: without them `reclaim` has nothing to do,
        and the heartbeat does not start it (a node without local-path volumes never has them)."""
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return vu.ANN_LOCAL_PATH_DELETE in annotations or vu.ANN_LOCAL_PATH_DELETED in annotations

    async def reclaim(self, node: Obj) -> None:
        """Delete the local-path directories the provisioner asks for on this `node` (as just read) and
        answer with the names done — all asked for but those a pod still links to (asked again next time)."""
        asked = vu.annotation_names(node, vu.ANN_LOCAL_PATH_DELETE)
        answered = vu.annotation_names(node, vu.ANN_LOCAL_PATH_DELETED)
        if not asked and not answered:
            return
        in_use = self._in_use()
        done = []
        for name in asked:
            directory = self.data_dir / LOCAL_PATH_DIR / name
            if name not in answered and (not PV_NAME.fullmatch(name) or directory.resolve() in in_use):
                log.warning("not deleting local-path volume %s: %s", name,
                            "a pod of this node uses it" if PV_NAME.fullmatch(name) else "not a volume name")
                continue
            if name not in answered:
                await asyncio.to_thread(shutil.rmtree, directory, ignore_errors=True)
                if directory.exists():
                    log.warning("deleting local-path volume %s (%s) failed; trying again later", name, directory)
                    continue
                log.info("reclaim policy Delete: deleted local-path volume %s (%s)", name, directory)
            done.append(name)
        if done != answered:
            await self.client.patch(resource_path("nodes", name=self.node_name), {"metadata": {"annotations": {
                vu.ANN_LOCAL_PATH_DELETED: " ".join(done) or None}}})
