"""The bubblewrap command line per container: protected dirs masked, volumes bound, securityContext applied."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.container import ConfigError
from kubelite.agent.sandbox import DEFAULT_CAPS, sandboxed

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("setpriv") is None,
                                reason="needs bubblewrap and setpriv")

Obj = dict[str, Any]
BWRAP = shutil.which("bwrap") or ""
SETPRIV = shutil.which("setpriv") or ""
DEFAULT_CAP_ARGS = ["--cap-drop", "ALL", *(a for c in sorted(DEFAULT_CAPS) for a in ("--cap-add", f"CAP_{c}"))]


def _pod(pod_sc: Obj | None = None, volumes: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"securityContext": pod_sc or {}, "volumes": volumes or []}}


def _split(cmd: list[str]) -> tuple[list[str], list[str]]:
    """(bwrap's options, what runs inside after env --default-signal)."""
    assert cmd[0] == "env" and cmd[1].startswith("--ignore-signal=") and cmd[2] == BWRAP
    end = cmd.index("--")
    assert cmd[end + 1:end + 3] == ["env", "--default-signal"]
    return cmd[3:end], cmd[end + 3:]


UID = os.geteuid()
GID = os.getegid()

SECURITY_CASES = [
    pytest.param({}, {}, ["--dev-bind", "/", "/", *DEFAULT_CAP_ARGS], ["id"],
                 id="no securityContext: containerd's default capabilities"),
    pytest.param({}, {"privileged": True}, ["--dev-bind", "/", "/"], ["id"],
                 id="privileged keeps every capability"),
    pytest.param({}, {"capabilities": {"add": ["ALL"]}}, ["--dev-bind", "/", "/"], ["id"],
                 id="add ALL keeps every capability"),
    pytest.param({}, {"capabilities": {"drop": ["ALL"]}}, ["--dev-bind", "/", "/", "--cap-drop", "ALL"], ["id"],
                 id="drop ALL"),
    pytest.param({}, {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}},
                 ["--dev-bind", "/", "/", "--cap-drop", "ALL", "--cap-add", "CAP_NET_BIND_SERVICE"], ["id"],
                 id="drop ALL add NET_BIND_SERVICE"),
    pytest.param({}, {"capabilities": {"drop": ["CAP_CHOWN", "kill"], "add": ["SYS_ADMIN"]}},
                 ["--dev-bind", "/", "/", "--cap-drop", "ALL",
                  *(a for c in sorted(set(DEFAULT_CAPS) - {"CHOWN", "KILL"} | {"SYS_ADMIN"})
                    for a in ("--cap-add", f"CAP_{c}"))], ["id"],
                 id="drop and add by name, with or without the CAP_ prefix"),
    pytest.param({}, {"readOnlyRootFilesystem": True},
                 ["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", *DEFAULT_CAP_ARGS], ["id"],
                 id="readOnlyRootFilesystem binds / read-only"),
    pytest.param({}, {"runAsUser": 1000, "capabilities": {"drop": ["ALL"]}},
                 ["--dev-bind", "/", "/", "--cap-drop", "ALL", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETUID"],
                 [SETPRIV, "--reuid", "1000", "--regid", str(GID), "--clear-groups", "--", "id"],
                 id="runAsUser: setpriv keeps SETUID/SETGID to switch, losing them with root"),
    pytest.param({"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000, 5000]}, {"runAsUser": 2000},
                 ["--dev-bind", "/", "/", *DEFAULT_CAP_ARGS],
                 [SETPRIV, "--reuid", "2000", "--regid", "3000", "--groups", "4000,5000", "--", "id"],
                 id="container runAsUser overrides the pod's, pod runAsGroup and supplementalGroups apply"),
    pytest.param({"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [4000]}, {},
                 ["--dev-bind", "/", "/", *DEFAULT_CAP_ARGS],
                 [SETPRIV, "--reuid", "1000", "--regid", str(GID), "--groups", "2000,4000", "--", "id"],
                 id="fsGroup is the first supplementary group, as kubelet's determineEffectiveSecurityContext adds it"),
    pytest.param({"runAsNonRoot": True}, {"runAsUser": 1000}, ["--dev-bind", "/", "/", *DEFAULT_CAP_ARGS],
                 [SETPRIV, "--reuid", "1000", "--regid", str(GID), "--clear-groups", "--", "id"],
                 id="runAsNonRoot with a non-root runAsUser runs"),
]


@pytest.mark.parametrize("pod_sc,sc,want_options,want_inner", SECURITY_CASES)
def test_security_context_command_line(tmp_path: Path, pod_sc: Obj, sc: Obj, want_options: list[str],
                                       want_inner: list[str]) -> None:
    options, inner = _split(sandboxed(["id"], _pod(pod_sc), {"name": "c", "securityContext": sc}, tmp_path))
    assert options == want_options
    assert inner == want_inner


NON_ROOT_CASES = [
    pytest.param({"runAsNonRoot": True}, {}, "container has runAsNonRoot and image will run as root",
                 id="runAsNonRoot and the image user is root"),
    pytest.param({}, {"runAsNonRoot": True, "runAsUser": 0}, "container's runAsUser breaks non-root policy",
                 id="runAsNonRoot with runAsUser 0"),
]


@pytest.mark.skipif(UID != 0, reason="the image user is the agent's: root only when the agent is")
@pytest.mark.parametrize("pod_sc,sc,message", NON_ROOT_CASES)
def test_run_as_non_root_refused(tmp_path: Path, pod_sc: Obj, sc: Obj, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        sandboxed(["id"], _pod(pod_sc), {"name": "c", "securityContext": sc}, tmp_path)
    assert '(pod: "p_default(u1)", container: c)' in str(err.value)


def test_protected_dirs_masked_and_volumes_bound(tmp_path: Path) -> None:
    server, agent = tmp_path / "data", tmp_path / "data" / "agent"
    agent.mkdir(parents=True)
    vols = agent / "pods" / "x" / "volumes"
    pod = _pod(volumes=[{"name": "scratch", "emptyDir": {}},
                        {"name": "host", "hostPath": {"path": str(tmp_path / "h"), "type": "DirectoryOrCreate"}},
                        {"name": "root", "hostPath": {"path": str(tmp_path)}}])
    c = {"name": "c", "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                                       {"name": "host", "mountPath": "/host", "readOnly": True},
                                       {"name": "root", "mountPath": "/r"}]}
    options, _ = _split(sandboxed(["sh"], pod, c, vols, (agent, server)))
    # one tmpfs hides the server's data dir and the agent's inside it; hostPath "/…" re-masks it at /r/data
    assert options[options.index("--tmpfs"):] == [
        "--tmpfs", str(server),
        "--bind", str(vols / "scratch"), "/scratch", "--ro-bind", str(tmp_path / "h"), "/host",
        "--bind", str(tmp_path), "/r", "--tmpfs", "/r/data"]
    assert (vols / "scratch").is_dir() and (tmp_path / "h").is_dir()


@pytest.mark.parametrize("path", [
    pytest.param("data", id="the control plane's data dir"),
    pytest.param("data/admin.token", id="a file in it"),
    pytest.param("data/agent/pods", id="the agent's checkpoints"),
    pytest.param("data/agent/../pki", id="reached through .."),
])
def test_host_path_into_protected_dir_refused(tmp_path: Path, path: str) -> None:
    (tmp_path / "data" / "agent" / "pods").mkdir(parents=True)
    pod = _pod(volumes=[{"name": "v", "hostPath": {"path": str(tmp_path / path)}}])
    with pytest.raises(ConfigError, match=r"is inside .*data, which holds the node's credentials"):
        sandboxed(["sh"], pod, {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}, tmp_path / "v",
                  (tmp_path / "data" / "agent", tmp_path / "data"))


def test_unsupported_volumes_refused(tmp_path: Path) -> None:
    pod = _pod(volumes=[{"name": "cfg", "nfs": {"server": "x", "path": "/"}}])
    with pytest.raises(ConfigError, match="nfs is not supported"):
        sandboxed(["sh"], pod, {"name": "c", "volumeMounts": [{"name": "cfg", "mountPath": "/c"}]}, tmp_path)
    with pytest.raises(ConfigError, match="names no volume"):
        sandboxed(["sh"], pod, {"name": "c", "volumeMounts": [{"name": "nope", "mountPath": "/n"}]}, tmp_path)


@pytest.mark.parametrize("container,needs", [
    pytest.param({"name": "c"}, None, id="plain container runs unsandboxed"),
    pytest.param({"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}, "volumeMounts",
                 id="volumeMounts refused"),
    pytest.param({"name": "c", "securityContext": {"runAsUser": 1000}}, "runAsUser/runAsGroup",
                 id="runAsUser refused"),
    pytest.param({"name": "c", "securityContext": {"readOnlyRootFilesystem": True}}, "readOnlyRootFilesystem",
                 id="readOnlyRootFilesystem refused"),
])
def test_without_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: Obj,
                            needs: str | None) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: SETPRIV if name == "setpriv" else None)  # no bwrap
    pod = _pod(volumes=[{"name": "v", "emptyDir": {}}])
    if needs is None:
        assert sandboxed(["sh"], pod, container, tmp_path, (tmp_path,)) == ["sh"]
        return
    with pytest.raises(ConfigError, match=f"{needs} need the bubblewrap sandbox"):
        sandboxed(["sh"], pod, container, tmp_path, (tmp_path,))
