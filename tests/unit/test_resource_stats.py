"""Resource usage (agent/stats.py): CPU rates from two samples, process-tree sums, cgroup counters, the
/stats/summary and /metrics/resource presentations — on synthetic /proc and cgroup trees and a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubelite.agent.cgroups import Cgroups, Limits
from kubelite.agent.eviction.host_stats import PAGE_SIZE
from kubelite.agent.stats import (
    CLOCK_TICKS,
    ContainerRef,
    Proc,
    ResourceStats,
    Sample,
    cpu_rate,
    node_cpu_seconds,
    process_tree,
    read_processes,
    tree_usage,
)
from kubelite.clock import FakeClock


@pytest.mark.parametrize("name,previous,current,want", [
    ("half a core over one second", Sample(10.0, 4.0), Sample(11.0, 4.5), 500_000_000),
    ("two cores over two seconds", Sample(0.0, 1.0), Sample(2.0, 5.0), 2_000_000_000),
    ("idle", Sample(0.0, 3.0), Sample(5.0, 3.0), 0),
    ("no earlier sample", None, Sample(1.0, 1.0), None),
    ("same instant", Sample(1.0, 1.0), Sample(1.0, 2.0), None),
    ("counter went back (a process left the tree unreaped)", Sample(0.0, 9.0), Sample(1.0, 2.0), None),
    ("no reading now", Sample(0.0, 1.0), Sample(1.0, None), None),
    ("no reading before", Sample(0.0, None), Sample(1.0, 1.0), None),
])
def test_cpu_rate_from_two_samples(name: str, previous: Sample | None, current: Sample, want: int | None) -> None:
    assert cpu_rate(previous, current) == want


# pid → Proc(ppid, pgrp, cpu ticks, rss pages): group 100 is a container; 103 left it with setsid; 200 is another
# container; 300 was the container's child but was reparented to init (it is lost, as for any runtime without cgroups)
PROCS = {
    1: Proc(0, 1, 0, 0),
    100: Proc(1, 100, 10, 5),
    101: Proc(100, 100, 20, 7),
    102: Proc(101, 100, 30, 11),
    103: Proc(101, 103, 40, 13),
    104: Proc(103, 103, 50, 17),
    200: Proc(1, 200, 1000, 100),
    300: Proc(1, 100, 60, 19),
}


@pytest.mark.parametrize("name,group,want", [
    ("the group and the descendants that left it", 100, {100, 101, 102, 103, 104, 300}),
    ("another container's group alone", 200, {200}),
    ("a group with no process", 999, set()),
])
def test_process_tree(name: str, group: int, want: set[int]) -> None:
    assert process_tree(PROCS, group) == want


@pytest.mark.parametrize("name,group,want", [
    ("CPU ticks and resident pages summed over the tree", 100,
     ((10 + 20 + 30 + 40 + 50 + 60) / CLOCK_TICKS, (5 + 7 + 11 + 13 + 17 + 19) * PAGE_SIZE)),
    ("one process", 200, (1000 / CLOCK_TICKS, 100 * PAGE_SIZE)),
    ("nothing runs", 999, None),
])
def test_tree_usage(name: str, group: int, want: tuple[float, int] | None) -> None:
    assert tree_usage(PROCS, group) == want


def _stat(pid: int, comm: str, ppid: int, pgrp: int, utime: int, stime: int, cutime: int, cstime: int,
          rss: int) -> str:
    """A /proc/<pid>/stat line (fields 1-24 filled where read, zeros elsewhere)."""
    fields = ["S", ppid, pgrp, pgrp, 0, -1, 0, 0, 0, 0, 0, utime, stime, cutime, cstime, 20, 0, 1, 0, 12345, 999, rss]
    return f"{pid} ({comm}) " + " ".join(str(f) for f in fields) + " 0 0 0\n"


def test_read_processes_parses_stat_lines_whose_command_has_spaces_and_parens(tmp_path: Path) -> None:
    for pid, comm, ppid, pgrp in ((7, "sh", 1, 7), (8, "my (odd) cmd", 7, 7)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, comm, ppid, pgrp, 3, 4, 5, 6, 9))
    (tmp_path / "9").mkdir()  # a process that ended between listing and reading: skipped
    (tmp_path / "self").mkdir()
    assert read_processes(tmp_path) == {7: Proc(1, 7, 18, 9), 8: Proc(7, 7, 18, 9)}


def test_node_cpu_seconds_leaves_out_idle_and_iowait(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 10 50 1000 40 5 5 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    assert node_cpu_seconds(tmp_path) == pytest.approx((100 + 10 + 50 + 5 + 5) / CLOCK_TICKS)
    assert node_cpu_seconds(tmp_path / "absent") is None


@pytest.mark.parametrize("name,version,files,want", [
    ("v2 cpu.stat usage_usec", 2, {"kubelite/podu/c_0/cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n"}, 2.5),
    ("v1 cpuacct.usage in nanoseconds", 1, {"cpuacct/kubelite/podu/c_0/cpuacct.usage": "1500000000\n"}, 1.5),
    ("no counter file", 2, {}, None),
])
def test_cgroup_cpu_seconds(tmp_path: Path, name: str, version: int, files: dict[str, str],
                            want: float | None) -> None:
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    dirs = {"memory": tmp_path / "kubelite", "cpu": tmp_path / "kubelite"} if version == 2 else \
        {"memory": tmp_path / "memory/kubelite", "cpu": tmp_path / "cpu/kubelite",
         "cpuacct": tmp_path / "cpuacct/kubelite"}
    assert Cgroups(version, dirs).cpu_seconds("podu/c_0") == want


def test_v1_containers_join_a_separately_mounted_cpuacct_hierarchy(tmp_path: Path) -> None:
    for controller, probe in (("memory", "memory.limit_in_bytes"), ("cpu", "cpu.shares"),
                              ("cpuacct", "cpuacct.usage")):
        (tmp_path / controller).mkdir()
        (tmp_path / controller / probe).write_text("0")
    cg = Cgroups.detect(tmp_path)
    assert cg is not None and cg.dirs["cpuacct"] == tmp_path / "cpuacct" / "kubelite"
    procs = cg.create("podu/c_0", Limits("podu"))
    assert str(tmp_path / "cpuacct/kubelite/podu/c_0/cgroup.procs") in procs and len(procs) == 3


# --- ResourceStats on a fake /proc and a fake clock ------------------------------------------------------------

class FakeHost:
    """/proc/stat, /proc/meminfo and one container's process group, with counters the test sets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "42").mkdir(parents=True)
        self.set(node_ticks=0, container_ticks=0)

    def set(self, node_ticks: int, container_ticks: int) -> None:
        (self.root / "stat").write_text(f"cpu  {node_ticks} 0 0 999999 0 0 0 0 0 0\n")
        (self.root / "meminfo").write_text("MemTotal: 4000 kB\nMemFree: 1000 kB\nInactive(file): 1000 kB\n")
        (self.root / "42" / "stat").write_text(_stat(42, "spin", 1, 42, container_ticks, 0, 0, 0, 3))


REF = ContainerRef("default", "busy", "uid-1", "main", started=1_700_000_000.0, pid=42)


async def test_rates_come_from_the_start_then_from_consecutive_samples(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    host = FakeHost(tmp_path)
    stats = ResourceStats(clock, lambda: [REF], None, "node-1", proc=tmp_path, min_window=1.0)
    await clock.advance(2.0)
    host.set(node_ticks=CLOCK_TICKS, container_ticks=CLOCK_TICKS)  # one CPU second in the first two seconds
    await stats.refresh()
    usage = stats.snapshot.containers[REF.key]
    assert usage.nanocores == 500_000_000  # measured from the container's start, when it had used nothing
    assert stats.snapshot.node is not None and stats.snapshot.node.nanocores is None  # the node needs two samples
    await clock.advance(0.5)
    host.set(node_ticks=2 * CLOCK_TICKS, container_ticks=2 * CLOCK_TICKS)
    await stats.refresh()  # younger than min_window: the latest sample stands
    assert stats.snapshot.containers[REF.key].nanocores == 500_000_000
    await clock.advance(0.5)
    await stats.refresh()  # one second after the previous sample: one more CPU second = one core
    assert stats.snapshot.containers[REF.key].nanocores == 1_000_000_000
    assert stats.snapshot.node.nanocores == 1_000_000_000

    summary = stats.summary()
    assert summary["node"]["nodeName"] == "node-1"
    assert summary["node"]["memory"]["workingSetBytes"] == 2000 * 1024  # (4000 - 1000) - 1000 kB
    [pod] = summary["pods"]
    assert pod["podRef"] == {"name": "busy", "namespace": "default", "uid": "uid-1"}
    [container] = pod["containers"]
    assert container["cpu"]["usageNanoCores"] == 1_000_000_000
    assert container["cpu"]["usageCoreNanoSeconds"] == 2_000_000_000
    assert container["memory"]["workingSetBytes"] == 3 * PAGE_SIZE
    assert pod["cpu"]["usageNanoCores"] == 1_000_000_000 and pod["memory"]["workingSetBytes"] == 3 * PAGE_SIZE


async def test_a_restarted_container_is_measured_from_its_new_start(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    host = FakeHost(tmp_path)
    refs = [REF]
    stats = ResourceStats(clock, lambda: refs, None, "node-1", proc=tmp_path)
    await clock.advance(1.0)
    host.set(0, CLOCK_TICKS)
    await stats.refresh()
    await clock.advance(4.0)
    refs[0] = ContainerRef("default", "busy", "uid-1", "main", started=clock.now() - 2.0, pid=42)
    host.set(0, CLOCK_TICKS // 2)  # the new instance used half a second in its two seconds
    await stats.refresh()
    assert stats.snapshot.containers[refs[0].key].nanocores == 250_000_000
    assert REF.key not in stats.snapshot.containers


async def test_resource_metrics_exposition_names_labels_and_timestamps(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    FakeHost(tmp_path)
    stats = ResourceStats(clock, lambda: [REF], None, "node-1", proc=tmp_path)
    await clock.advance(1.0)
    await stats.refresh()
    text = generate_latest(stats.registry()).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {"node_cpu_usage_seconds", "node_memory_working_set_bytes",
                             "container_cpu_usage_seconds", "container_memory_working_set_bytes",
                             "container_start_time_seconds", "pod_cpu_usage_seconds",
                             "pod_memory_working_set_bytes", "scrape_error"}
    assert families["container_cpu_usage_seconds"].type == "counter"
    [sample] = families["container_memory_working_set_bytes"].samples
    assert sample.labels == {"container": "main", "pod": "busy", "namespace": "default"}
    assert sample.value == 3 * PAGE_SIZE and sample.timestamp == pytest.approx(1_700_000_001.0)
    assert "container_cpu_usage_seconds_total{" in text and "node_cpu_usage_seconds_total " in text
    assert families["scrape_error"].samples[0].value == 0


async def test_a_new_container_is_sampled_at_once_without_shortening_the_others_windows(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    host = FakeHost(tmp_path)
    (tmp_path / "43").mkdir()
    (tmp_path / "43" / "stat").write_text(_stat(43, "sleep", 1, 43, 0, 0, 0, 0, 1))
    refs = [REF]
    stats = ResourceStats(clock, lambda: refs, None, "node-1", proc=tmp_path, min_window=1.0)
    await clock.advance(1.0)
    host.set(CLOCK_TICKS, CLOCK_TICKS)
    await stats.refresh()
    await clock.advance(2.0)
    host.set(3 * CLOCK_TICKS, 3 * CLOCK_TICKS)
    await stats.refresh()  # two CPU seconds in two seconds
    await clock.advance(0.2)
    new = ContainerRef("default", "other", "uid-2", "main", started=clock.now() - 0.1, pid=43)
    refs.append(new)
    await stats.refresh()  # within min_window, but a container started: sampled now
    assert new.key in stats.snapshot.containers and stats.snapshot.containers[new.key].nanocores == 0
    # the busy container's rate still spans at least min_window (from the sample before last), not 0.2 s
    assert stats.snapshot.containers[REF.key].nanocores == round(2 / 2.2 * 1e9)
