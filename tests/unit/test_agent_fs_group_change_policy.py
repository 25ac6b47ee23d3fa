"""`securityContext.fsGroupChangePolicy: OnRootMismatch` (pkg/volume/volume_linux.go skipPermissionChange and
requiresPermissionChange): the recursive ownership change is skipped when the volume's root already has the fsGroup,
the group's bits and setgid. Real directories; the chown needs the agent as root, as it runs in CI."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.volumes.claims import ClaimVolumes
from kubelite.agent.volumes.ownership import EXEC_MASK, RW_MASK, set_volume_ownership, skip_permission_change
from kubelite.apiserver.inprocess import InProcessClient
from tests.unit.test_claim_volumes import NODE, _world, client  # noqa: F401 (client: the fixture)

Obj = dict[str, Any]
ALWAYS, ON_ROOT_MISMATCH = "Always", "OnRootMismatch"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the fsGroup's chown needs root")


# TestSkipPermissionChange, by name
@pytest.mark.parametrize("policy,gid_match,perm_match,sgid_match,skip", [
    pytest.param(None, False, False, False, False, id="skippermission=false, policy=nil"),
    pytest.param(ALWAYS, False, False, False, False, id="skippermission=false, policy=always"),
    pytest.param(ALWAYS, True, False, False, False, id="skippermission=false, policy=always, gidmatch=true"),
    pytest.param(None, True, False, False, False, id="skippermission=false, policy=nil, gidmatch=true"),
    pytest.param(ON_ROOT_MISMATCH, False, False, False, False,
                 id="skippermission=false, policy=onrootmismatch, gidmatch=false"),
    pytest.param(ON_ROOT_MISMATCH, True, False, False, False,
                 id="skippermission=false, policy=onrootmismatch, gidmatch=true, permmatch=false"),
    pytest.param(ON_ROOT_MISMATCH, True, True, False, False,
                 id="skippermission=false, policy=onrootmismatch, gidmatch=true, permmatch=true"),
    pytest.param(ON_ROOT_MISMATCH, True, True, True, True,
                 id="skippermission=false, policy=onrootmismatch, gidmatch=true, permmatch=true, sgidmatch=true"),
])
def test_skip_permission_change(tmp_path: Path, policy: str | None, gid_match: bool, perm_match: bool,
                                sgid_match: bool, skip: bool) -> None:
    st = tmp_path.lstat()
    group = st.st_gid if gid_match else st.st_gid + 3000
    mode = RW_MASK | (EXEC_MASK if perm_match else 0)
    base = stat.S_IMODE(st.st_mode)
    tmp_path.chmod(base | mode | stat.S_ISGID if sgid_match else (base & ~stat.S_ISGID) | mode)
    assert skip_permission_change(tmp_path, group, False, policy) is skip


# TestSkipPermissionChangeCombinations, by name: the temporary directory is not the fsGroup's (1000)
@pytest.mark.parametrize("policy,read_only", [
    pytest.param(ALWAYS, False, id="Always policy, not readonly"),
    pytest.param(ALWAYS, True, id="Always policy, readonly"),
    pytest.param(ON_ROOT_MISMATCH, False, id="OnRootMismatch policy, not readonly"),
    pytest.param(ON_ROOT_MISMATCH, True, id="OnRootMismatch policy, readonly"),
    pytest.param(None, False, id="Nil policy, not readonly"),
    pytest.param(None, True, id="Nil policy, readonly"),
])
def test_skip_permission_change_combinations(tmp_path: Path, policy: str | None, read_only: bool) -> None:
    os.chown(tmp_path, -1, 0)
    assert skip_permission_change(tmp_path, 1000, read_only, policy) is False


def _valid_root(path: Path) -> None:
    path.chmod(stat.S_IMODE(path.stat().st_mode) | RW_MASK | EXEC_MASK | stat.S_ISGID)


def _invalid_root(path: Path) -> None:
    path.chmod(0o770)


# TestSetVolumeOwnershipMode's OnRootMismatch cases, by name: a subdirectory with wrong permissions is fixed only
# when the root does not match
@pytest.mark.parametrize("setup,fixed", [
    pytest.param(_valid_root, False, id="featuregate=on, fsgroupchangepolicy=onrootmismatch,rootdir=validperm"),
    pytest.param(_invalid_root, True, id="featuregate=on, fsgroupchangepolicy=onrootmismatch,rootdir=invalidperm"),
])
def test_set_volume_ownership_on_root_mismatch(tmp_path: Path, setup: Any, fixed: bool) -> None:
    setup(tmp_path)
    rogue = tmp_path / "roguedir"
    rogue.mkdir()
    rogue.chmod(RW_MASK)
    set_volume_ownership(tmp_path, tmp_path.stat().st_gid, False, ON_ROOT_MISMATCH)
    want = RW_MASK | EXEC_MASK
    mode = rogue.stat().st_mode
    assert (stat.S_IMODE(mode) & want == want and bool(mode & stat.S_ISGID)) is fixed


def _pod(policy: str | None, read_only: bool = False) -> Obj:
    sc: Obj = {"fsGroup": 3000, **({"fsGroupChangePolicy": policy} if policy else {})}
    return {"metadata": {"namespace": "default", "name": "p"},
            "spec": {"securityContext": sc,
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data", "readOnly": read_only}}]}}


@pytest.mark.parametrize("driver,policy,read_only,root_given,changed", [
    pytest.param("local", None, False, False, True, id="local volume: the fsGroup on the whole volume"),
    pytest.param("local", ON_ROOT_MISMATCH, False, True, False,
                 id="local volume, OnRootMismatch, root already the group's: nothing walked"),
    pytest.param("local", ON_ROOT_MISMATCH, False, False, True,
                 id="local volume, OnRootMismatch, root not the group's: the whole volume"),
    pytest.param("local", ALWAYS, False, True, True, id="local volume, Always: the whole volume every time"),
    pytest.param("local", None, True, False, False, id="local volume mounted read-only: no fsGroup"),
    pytest.param("hostPath", None, False, False, False, id="hostPath volume: no fsGroup, as its plugin"),
])
async def test_claim_volume_ownership(client: InProcessClient, tmp_path: Path, driver: str,  # noqa: F811
                                      policy: str | None, read_only: bool, root_given: bool, changed: bool) -> None:
    volume = tmp_path / "disk"
    (volume / "sub").mkdir(parents=True)
    (volume / "sub" / "file").touch(mode=0o600)
    if root_given:
        os.chown(volume, -1, 3000)
        _valid_root(volume)
    await _world(client, tmp_path, driver=driver, pinned=NODE if driver == "local" else None, path="disk")
    assert await ClaimVolumes(client, NODE, tmp_path / "agent").prepare(_pod(policy, read_only),
                                                                        tmp_path / "pod" / "volumes") == ""
    st = (volume / "sub" / "file").stat()
    assert (st.st_gid == 3000 and stat.S_IMODE(st.st_mode) == 0o660) is changed


def test_the_walk_leaves_the_node_s_protected_directories_alone(tmp_path: Path) -> None:
    """A local volume that holds the agent's data dir (say at `/`) gets the fsGroup everywhere but there: the node's
    keys and state keep their owner and private modes."""
    volume = tmp_path / "volume"
    protected = volume / "agent-data"
    (protected / "pki").mkdir(parents=True)
    key = protected / "pki" / "node.key"
    key.write_text("secret")
    key.chmod(0o600)
    (volume / "data").write_text("x")
    before = {p: p.lstat() for p in (protected, protected / "pki", key)}
    group = tmp_path.lstat().st_gid + 3000
    set_volume_ownership(volume, group, False, protected=[protected])
    assert (volume / "data").lstat().st_gid == group and volume.lstat().st_gid == group
    for path, st in before.items():
        assert (path.lstat().st_gid, path.lstat().st_mode) == (st.st_gid, st.st_mode), path
