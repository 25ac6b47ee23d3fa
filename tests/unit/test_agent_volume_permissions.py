"""Volumes a non-root container can use, with the agent's umask 077 in effect: real volume set-up (the volume
manager, the AtomicWriter, emptyDir), then a real child process in the bubblewrap sandbox as runAsUser 1000 reads
and writes them. Upstream: emptyDir 0777 (pkg/volume/emptydir), atomic-writer files by defaultMode / item mode,
fsGroup ownership (pkg/volume/volume_linux.go SetVolumeOwnership, whose table cases are ported below), a projected
token owned by the pod's runAsUser (FsUserFrom)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.sandbox import sandboxed
from kubelite.agent.volumes.manager import VolumeManager
from kubelite.agent.volumes.ownership import EXEC_MASK, RW_MASK, set_volume_ownership
from tests.unit.volume_fakes import ScriptedTokens, StaticObjects

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("setpriv") is None,
                       reason="needs bubblewrap and setpriv"),
    pytest.mark.skipif(os.geteuid() != 0, reason="ownership and another user's process need root, as the agent's"),
]

Obj = dict[str, Any]
USER, GROUP = 1000, 2000
MOUNT_BASE = Path("/mnt/kubelite-volume-permissions")  # made anew by each test: the sandbox makes it 0755
MOUNT = f"{MOUNT_BASE}/v"
OBJECTS = StaticObjects(
    ("configmap", {"metadata": {"name": "cm", "namespace": "default"}, "data": {"k": "from-configmap"}}),
    ("secret", {"metadata": {"name": "sec", "namespace": "default"}, "data": {"k": "ZnJvbS1zZWNyZXQ="}}),
)


@pytest.fixture(autouse=True)
def agent_umask() -> Iterator[None]:
    """The agent's umask (cli/components.py private_files) while volumes are set up; no mount point left over."""
    shutil.rmtree(MOUNT_BASE, ignore_errors=True)
    old = os.umask(0o077)
    yield
    os.umask(old)
    shutil.rmtree(MOUNT_BASE, ignore_errors=True)


def _pod(volume: Obj, **pod_sc: Any) -> Obj:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"securityContext": {"runAsUser": USER, **pod_sc}, "volumes": [volume],
                     "containers": [{"name": "c"}]}}


async def _run_as_user(tmp_path: Path, pod: Obj, script: str, sub_path: str = "") -> subprocess.CompletedProcess[str]:
    """Set the pod's volumes up as the agent does, then run `script` in the sandbox as the pod's user."""
    root = tmp_path / "pod" / "volumes"
    await VolumeManager(OBJECTS, ScriptedTokens(), "127.0.0.1", {}).set_up(pod, root)
    mount = {"name": "v", "mountPath": MOUNT, **({"subPath": sub_path} if sub_path else {})}
    container = {"name": "c", "volumeMounts": [mount]}
    cmd = sandboxed(["sh", "-c", script], pod, container, root)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, umask=0o022)


USES = [
    pytest.param({"name": "v", "configMap": {"name": "cm"}}, {}, f"stat -c %a {MOUNT_BASE}; cat {MOUNT}/k",
                 "755\nfrom-configmap", id="a non-root container reaches a mount point made for it and reads its "
                 "configMap volume"),
    pytest.param({"name": "v", "secret": {"secretName": "sec"}}, {}, f"cat {MOUNT}/k", "from-secret",
                 id="a non-root container reads its secret volume"),
    pytest.param({"name": "v", "secret": {"secretName": "sec", "defaultMode": 0o400}}, {"fsGroup": GROUP},
                 f"stat -c '%a %g' {MOUNT}/..data/k; cat {MOUNT}/k", f"440 {GROUP}\nfrom-secret",
                 id="a defaultMode 0400 secret is readable through the fsGroup, which owns it"),
    pytest.param({"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "d/f", "mode": 0o444}]}},
                 {}, f"stat -c %a {MOUNT}/..data/d {MOUNT}/..data/d/f; cat {MOUNT}/d/f", "755\n444\nfrom-configmap",
                 id="an item's mode is honoured and the directories in a payload are 0755"),
    pytest.param({"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}, {},
                 f"stat -c '%a %u' {MOUNT}/..data/token; cat {MOUNT}/token", f"600 {USER}\ntoken-1",
                 id="the projected service account token is the pod user's, 0600"),
    pytest.param({"name": "v", "emptyDir": {}}, {}, f"stat -c %a {MOUNT}; echo hi > {MOUNT}/f; cat {MOUNT}/f",
                 "777\nhi", id="a non-root container writes its emptyDir"),
    pytest.param({"name": "v", "emptyDir": {}}, {"fsGroup": GROUP},
                 f"stat -c '%a %g' {MOUNT}; echo hi > {MOUNT}/f; stat -c %g {MOUNT}/f", f"2777 {GROUP}\n{GROUP}",
                 id="an emptyDir with fsGroup is setgid: what the container creates there has the group"),
]


@pytest.mark.parametrize("volume,pod_sc,script,out", USES)
async def test_non_root_container_uses_its_volume(tmp_path: Path, volume: Obj, pod_sc: Obj, script: str,
                                                  out: str) -> None:
    done = await _run_as_user(tmp_path, _pod(volume, **pod_sc), f"id -u; {script}")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"{USER}\n{out}", ""), done


async def test_a_subpath_directory_gets_its_volume_mode(tmp_path: Path) -> None:
    """SafeMakeDir: a subPath of an emptyDir is made with the volume's 0777, not the agent's umask."""
    done = await _run_as_user(tmp_path, _pod({"name": "v", "emptyDir": {}}), f"echo hi > {MOUNT}/f && cat {MOUNT}/f",
                              sub_path="a/b")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hi\n", "")
    assert stat.S_IMODE((tmp_path / "pod" / "volumes" / "v" / "a" / "b").stat().st_mode) == 0o777


# pkg/volume/volume_linux_test.go TestSetVolumeOwnershipMode (policy Always) and TestSetVolumeOwnershipOwner.
def _rogue_dir(path: Path) -> None:
    path.chmod(stat.S_IMODE(path.stat().st_mode) | RW_MASK | EXEC_MASK | stat.S_ISGID)
    (path / "roguedir").mkdir(mode=stat.S_IMODE(path.stat().st_mode) & ~stat.S_ISGID)


def _file(path: Path) -> None:
    (path / "file.txt").touch(mode=0o755)


def _symlink(path: Path) -> None:
    _file(path)
    (path / "file_link.txt").symlink_to(path / "file.txt")


OWNERSHIP = [
    pytest.param(_rogue_dir, 3000, "roguedir", (None, 0o2770), id="featuregate=on, fsgroupchangepolicy=always"),
    pytest.param(_file, None, "file.txt", (0, None), id="fsGroup=nil"),
    pytest.param(_file, 3000, "file.txt", (3000, None), id="*fsGroup=3000"),
    pytest.param(_symlink, 3000, "file_link.txt", (3000, None), id="symlink"),
]


@pytest.mark.parametrize("setup,group,name,want", OWNERSHIP)
def test_set_volume_ownership(tmp_path: Path, setup: Any, group: int | None, name: str,
                              want: tuple[int | None, int | None]) -> None:
    setup(tmp_path)
    set_volume_ownership(tmp_path, group, read_only=False)
    st = (tmp_path / name).lstat()
    want_gid, want_bits = want
    if want_gid is not None:
        assert st.st_gid == want_gid
    if want_bits is not None:  # verifyDirectoryPermission: rw and x for the group, and setgid
        assert st.st_mode & want_bits == want_bits


def test_a_symlink_never_widens_the_file_it_points_to(tmp_path: Path) -> None:
    """changeFilePermission skips chmod on a symlink: a chmod would follow it and override the file's defaultMode."""
    (tmp_path / "data").write_text("x")
    (tmp_path / "data").chmod(0o400)
    (tmp_path / "link").symlink_to("data")
    set_volume_ownership(tmp_path, 3000, read_only=True)
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o440  # its own walk: the group's read bit only


@pytest.mark.parametrize("volume", [
    pytest.param({"name": "v", "configMap": {"name": "cm"}}, id="above a configMap volume"),
    pytest.param({"name": "v", "emptyDir": {}}, id="above an emptyDir"),
])
async def test_the_agents_directories_above_a_volume_stay_private(tmp_path: Path, volume: Obj) -> None:
    done = await _run_as_user(tmp_path, _pod(volume), "true")
    assert done.returncode == 0
    assert [stat.S_IMODE((tmp_path / d).stat().st_mode) for d in ("pod", "pod/volumes")] == [0o700, 0o700]
