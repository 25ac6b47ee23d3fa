"""The host StatsProvider (L21) on real files, directories and processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubelite.agent.eviction.host_stats import (
    HostStatsProvider,
    PodPaths,
    cgroup_working_set,
    disk_usage,
    meminfo,
    node_memory,
    pid_stats,
    process_groups,
)
from kubelite.clock import FakeClock

MIB = 2**20


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def test_node_memory_is_capacity_minus_working_set_as_kubelet_computes_it(tmp_path: Path) -> None:
    """working set = (MemTotal - MemFree) - Inactive(file); available = MemTotal - working set (not MemAvailable)."""
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    900 kB\n"
                                      "Inactive(file):   300 kB\nHugePages_Total:       0\n")
    info = meminfo(tmp_path / "meminfo")
    assert info["HugePages_Total"] == 0
    assert node_memory(info) == (500 * 1024, 500 * 1024)
    assert node_memory({}) is None


def test_disk_usage_counts_allocated_blocks_and_inodes_recursively(tmp_path: Path) -> None:
    write(tmp_path / "vol" / "a.bin", 2 * MIB)
    write(tmp_path / "vol" / "sub" / "b.bin", MIB)
    (tmp_path / "vol" / "link").symlink_to("/usr")  # not followed
    usage = disk_usage(tmp_path / "vol")
    assert 3 * MIB <= (usage.used or 0) < 3 * MIB + 64 * 1024
    assert usage.inodes_used == 4  # a.bin, sub, sub/b.bin, link
    assert disk_usage(tmp_path / "absent").used == 0


@pytest.mark.parametrize(("files", "want"), [
    pytest.param({"memory.current": "5000", "memory.stat": "anon 10\ninactive_file 1500\n"}, 3500, id="cgroup v2"),
    pytest.param({"memory.usage_in_bytes": "8000", "memory.stat": "cache 1\ntotal_inactive_file 3000\n"}, 5000,
                 id="cgroup v1"),
    pytest.param({"memory.current": "100", "memory.stat": "inactive_file 500\n"}, 0, id="never negative"),
    pytest.param({}, None, id="no cgroup files"),
])
def test_cgroup_working_set(tmp_path: Path, files: dict[str, str], want: int | None) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert cgroup_working_set(tmp_path) == want


def test_process_groups_count_the_memory_and_processes_of_a_real_process_group() -> None:
    script = "import subprocess, time; c = subprocess.Popen(['sleep', '30']); b = bytearray(30 * 2**20); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    try:
        for _ in range(200):
            rss, count = process_groups().get(proc.pid, (0, 0))
            if rss >= 30 * MIB and count == 2:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert 30 * MIB <= rss < 200 * MIB
        assert count == 2  # python and its sleep child share the group
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_pid_stats_as_kubelet_pidlimit(tmp_path: Path) -> None:
    """MaxPID = min(kernel.pid_max, kernel.threads-max); running tasks from /proc/loadavg's 4th field."""
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "pid_max").write_text("4194304\n")
    (tmp_path / "sys" / "kernel" / "threads-max").write_text("191524\n")
    (tmp_path / "loadavg").write_text("0.52 0.58 0.59 3/1251 123456\n")
    assert pid_stats(tmp_path) == (191524, 1251)
    assert pid_stats(tmp_path / "absent") == (None, None)


async def test_summary_of_the_node_and_a_pod(tmp_path: Path) -> None:
    write(tmp_path / "pods" / "p" / "volumes" / "scratch" / "fill.bin", 4 * MIB)
    write(tmp_path / "pods" / "p" / "app" / "0.log", MIB)
    cgroup = tmp_path / "cg"
    cgroup.mkdir()
    (cgroup / "memory.current").write_text(str(300 * MIB))
    (cgroup / "memory.stat").write_text(f"inactive_file {100 * MIB}\n")
    paths = PodPaths(volumes={"scratch": tmp_path / "pods" / "p" / "volumes" / "scratch"},
                     logs={"app": tmp_path / "pods" / "p" / "app", "side": tmp_path / "pods" / "p" / "side"},
                     cgroups={"app": cgroup}, process_groups={"side": [os.getpgid(0)]})
    clock = FakeClock()
    provider = HostStatsProvider(clock, tmp_path, lambda pod: paths)
    summary = await provider.summary([{"metadata": {"uid": "u1"}}])

    vfs = os.statvfs(tmp_path)
    assert summary.node.fs is not None
    assert summary.node.fs.capacity == vfs.f_blocks * vfs.f_frsize and summary.node.fs.inodes == vfs.f_files
    assert summary.node.memory_available is not None and summary.node.memory_available > 0
    assert summary.node.time == clock.now()
    (stats,) = summary.pods
    containers = {c.name: c for c in stats.containers}
    assert containers["app"].memory_working_set == 200 * MIB  # the cgroup's working set
    assert (containers["side"].memory_working_set or 0) > MIB  # this test's own process group, from /proc
    assert containers["app"].logs is not None and (containers["app"].logs.used or 0) >= MIB
    assert containers["app"].rootfs is not None and containers["app"].rootfs.used == 0
    volumes = dict(stats.volumes)
    assert (volumes["scratch"].used or 0) >= 4 * MIB
    assert stats.ephemeral_storage is not None and (stats.ephemeral_storage.used or 0) >= 5 * MIB
    assert stats.memory_working_set == 200 * MIB + (containers["side"].memory_working_set or 0)
    assert stats.process_count is not None and stats.process_count >= 1  # this test's process group
    assert summary.node.max_pid is not None and summary.node.running_processes is not None
