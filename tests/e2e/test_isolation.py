"""Isolation (issue 10, item 5): a pod never reads the node's credentials or state; private files; securityContext."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import agent_pid, apply_pod, container_status, get_pod, pod_phase, sh, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]


def _terminated(up: ServerProcess, name: str) -> dict[str, object]:
    assert wait_for(lambda: pod_phase(up, name) in ("Succeeded", "Failed"), 30), get_pod(up, name).get("status")
    return dict(container_status(up, name, "main")["state"]["terminated"])


def _secrets(up: ServerProcess) -> list[Path]:
    data = up.data_dir
    checkpoints = sorted((data / "agent" / "pods").glob("*/checkpoint.json"))
    assert checkpoints, "some pod's checkpoint exists to be read"
    paths = [data / "admin.token", data / "pki" / "ca.key", data / "state.db", checkpoints[0]]
    assert all(p.is_file() for p in paths)
    # through the agent's root directory link: needs CAP_SYS_PTRACE, not among a container's capabilities
    return [*paths, Path(f"/proc/{agent_pid(up.proc.pid)}/root{data / 'admin.token'}")]


def test_pod_cannot_read_control_plane_or_agent_files(up: ServerProcess) -> None:
    apply_pod(up, "running", [sh("main", "sleep 600")], terminationGracePeriodSeconds=1)  # a checkpoint to try
    assert wait_for(lambda: pod_phase(up, "running") == "Running", 30)
    paths = _secrets(up)
    script = "; ".join(f"cat {p} >/dev/null && echo READ {p}" for p in paths) + "; exit 3"
    apply_pod(up, "snoop", [sh("main", script)], restartPolicy="Never")
    terminated = _terminated(up, "snoop")
    log = up.kubectl("logs", "snoop").stdout
    assert terminated["exitCode"] == 3 and "READ" not in log, log
    for p in paths:
        assert f"cat: {p}: No such file or directory" in log or f"cat: {p}: Permission denied" in log, log
    up.kubectl("delete", "pod", "running", "--grace-period=1")


def test_host_path_into_the_data_dir_is_refused(up: ServerProcess) -> None:
    apply_pod(up, "mount-pki", [sh("main", "cat /pki/ca.key", volumeMounts=[{"name": "pki", "mountPath": "/pki"}])],
              volumes=[{"name": "pki", "hostPath": {"path": str(up.data_dir / "pki")}}], restartPolicy="Never")

    def refused() -> bool:
        waiting = container_status(up, "mount-pki", "main").get("state", {}).get("waiting", {})
        return waiting.get("reason") == "CreateContainerConfigError" and "is inside" in waiting.get("message", "")

    assert wait_for(refused, 30), get_pod(up, "mount-pki").get("status")
    up.kubectl("delete", "pod", "mount-pki", "--grace-period=0", "--force")


def test_data_dirs_and_files_are_private(up: ServerProcess) -> None:
    apply_pod(up, "logged", [sh("main", "echo hello")], restartPolicy="Never")
    assert wait_for(lambda: pod_phase(up, "logged") == "Succeeded", 30)
    data = up.data_dir
    logs = sorted((data / "agent" / "pods").glob("default_logged_*/main/0.log"))
    assert logs
    for d in (data, data / "agent"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    files = [data / "state.db", data / "state.db-wal", data / "admin.token", data / "pki" / "ca.key",
             *(data / "agent" / "pods").glob("*/checkpoint.json"), *logs]
    for f in files:
        if f.exists():  # the WAL is checkpointed away at times
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert (data / "state.db").exists() and logs


def test_run_as_user(up: ServerProcess) -> None:
    apply_pod(up, "as-1000", [sh("main", "id -u; id -g", securityContext={"runAsUser": 1000, "runAsGroup": 3000})],
              restartPolicy="Never")
    assert _terminated(up, "as-1000")["exitCode"] == 0
    assert up.kubectl("logs", "as-1000").stdout.split() == ["1000", "3000"]


def test_read_only_root_filesystem_and_run_as_non_root(up: ServerProcess) -> None:
    apply_pod(up, "ro", [sh("main", "touch /var/tmp/kubelite-ro-test",
                            securityContext={"readOnlyRootFilesystem": True})], restartPolicy="Never")
    assert _terminated(up, "ro")["exitCode"] == 1
    assert "Read-only file system" in up.kubectl("logs", "ro").stdout
    apply_pod(up, "nonroot", [sh("main", "true", securityContext={"runAsNonRoot": True})], restartPolicy="Never")

    def refused() -> bool:
        waiting = container_status(up, "nonroot", "main").get("state", {}).get("waiting", {})
        return "container has runAsNonRoot and image will run as root" in waiting.get("message", "")

    assert wait_for(refused, 30), get_pod(up, "nonroot").get("status")
    up.kubectl("delete", "pod", "nonroot", "--grace-period=0", "--force")
