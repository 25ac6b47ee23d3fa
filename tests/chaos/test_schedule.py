"""Seeded schedules and the run's bookkeeping: the same seed gives the same faults (a violation is
reproduced by its seed), faults keep their per-target and server exclusivity, and recovery is measured
from each fault's end."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kubelite.testing.chaos import procs, workload
from kubelite.testing.chaos.observations import MountSample, ProcSample
from kubelite.testing.chaos.run import Recovery, episodes, recovery_times
from kubelite.testing.chaos.schedule import KINDS, POD_DELETE, SERVER, SERVER_FAULTS, Fault, generate

NODES = ["node-a", "node-b", "node-c"]
PODS = ["db-0", "web"]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert generate(5, 60, NODES, PODS) == generate(5, 60, NODES, PODS)
    assert generate(5, 60, NODES, PODS) != generate(6, 60, NODES, PODS)


@pytest.mark.parametrize("seed", range(30))
def test_faults_stay_inside_the_run_and_never_overlap_on_one_target(seed: int) -> None:
    faults = generate(seed, 60, NODES, PODS)
    assert faults and all(f.kind in KINDS for f in faults)
    assert all(f.at >= 3.0 and f.end <= 60 for f in faults)

    by_target: dict[str, list[Fault]] = {}
    for f in faults:
        if f.kind != POD_DELETE:
            by_target.setdefault(f.target, []).append(f)
    for target, fs in by_target.items():
        assert all(a.end <= b.at for a, b in itertools.pairwise(fs)), target
    assert all(f.target == SERVER for f in faults if f.kind in SERVER_FAULTS)
    assert all(len(f.graces) == 2 and min(f.graces) >= 1 for f in faults if f.kind == POD_DELETE)


def test_a_short_schedule_keeps_the_density_of_faults() -> None:
    counts = [len(generate(seed, 12, NODES, PODS)) for seed in range(20)]
    assert min(counts) >= 1 and sum(counts) >= 3 * len(counts), counts


def test_excluding_a_kind_leaves_the_rest_of_the_seeds_schedule_as_it_was() -> None:
    full = generate(7, 60, NODES, PODS)
    without = generate(7, 60, NODES, PODS, exclude=frozenset({"half_open"}))
    assert any(f.kind == "half_open" for f in full)
    freed = {f.target for f in full if f.kind == "half_open"}  # these may now take a fault they were busy for
    assert all(f.kind != "half_open" for f in without)
    assert [f for f in without if f.target not in freed] == [f for f in full if f.target not in freed]


RECOVERY = [
    ("healthy again 2 s after the end", [(9.0, True), (11.0, False), (14.0, False), (17.0, True)],
     Recovery(2.0, True)),
    ("never unhealthy: recovered at the next look, undisturbed", [(9.0, True), (16.0, True)], Recovery(1.0, False)),
    ("never healthy again", [(11.0, False), (20.0, False)], Recovery(None, True)),
]


@pytest.mark.parametrize(("name", "health", "want"), RECOVERY, ids=[c[0] for c in RECOVERY])
def test_recovery_is_measured_from_the_fault_end(name: str, health: list[tuple[float, bool]],
                                                  want: Recovery) -> None:
    assert recovery_times([Fault(10.0, "drop", "node-a", 5.0)], health) == [want]


def test_episodes_merge_overlapping_faults_and_measure_recovery_from_the_last_end() -> None:
    faults = [Fault(10.0, "drop", "node-a", 5.0), Fault(12.0, "cut", "node-b", 6.0), Fault(30.0, "up", "node-c", 2.0)]
    got = episodes(faults, [(11.0, False), (19.0, True), (31.0, False), (33.5, True)])
    assert [(e.start, e.end, e.recovery) for e in got] == [(10.0, 18.0, Recovery(1.0, True)),
                                                          (30.0, 32.0, Recovery(1.5, True))]


def test_a_recovery_confounded_by_another_fault_is_marked_overlapped() -> None:
    first, second = Fault(10.0, "drop", "node-a", 5.0), Fault(14.0, "cut", "node-b", 5.0)
    got = recovery_times([first, second], [(12.0, False), (20.0, True)])
    assert [r.overlapped for r in got] == [True, False]


def _fake_proc(root: Path, pid: int, comm: str, env: dict[str, str], state: str = "S") -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "comm").write_text(comm + "\n")
    (d / "stat").write_text(f"{pid} ({comm}) {state} 1 1 1\n")
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")


def test_scan_finds_the_runs_live_workload_processes_by_their_markers(tmp_path: Path) -> None:
    ours = {"CHAOS_RUN": "r1", "CHAOS_IDENTITY": "db-0", "CHAOS_POD_UID": "u1", "CHAOS_NODE": "node-a",
            "CHAOS_KIND": "statefulset"}
    _fake_proc(tmp_path, 10, "bash", ours)
    _fake_proc(tmp_path, 11, "sleep", ours)  # the loop's child: same markers, not an instance
    _fake_proc(tmp_path, 12, "bash", {**ours, "CHAOS_RUN": "r0"})  # another run's
    _fake_proc(tmp_path, 13, "bash", ours, state="Z")  # dead, not yet reaped
    _fake_proc(tmp_path, 14, "bash", {"HOME": "/root"})  # not a workload
    (tmp_path / "self").mkdir()
    assert procs.scan("r1", 2.0, tmp_path) == [ProcSample(2.0, 10, "db-0", "u1", "node-a", True)]


def test_the_volume_mounted_at_data_is_read_from_mountinfo(tmp_path: Path) -> None:
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "mountinfo").write_text(
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "90 22 0:40 /run/chaos/volumes/pvc-1 /data rw - tmpfs tmpfs rw\n"
        "91 22 0:40 /run/chaos/other /etc/x rw - tmpfs tmpfs rw\n")
    sample = ProcSample(2.0, 10, "db-0", "u1", "node-a", True)
    assert procs.data_volume(10, proc=tmp_path) == "pvc-1"
    assert procs.mounts([sample], proc=tmp_path) == [MountSample(2.0, "pvc-1", "node-a")]
    assert procs.mounts([ProcSample(2.0, 11, "db-0", "u1", "node-a", True)], proc=tmp_path) == []  # gone


def test_file_records_skip_torn_lines_and_count_from_the_run_start(tmp_path: Path) -> None:
    d = tmp_path / workload.VOLUMES / "pvc-1"
    d.mkdir(parents=True)
    (d / "db-0.log").write_text("db-0 u1 node-a 42 1 1000.5\ndb-0 u1 node-a 42 2 1001.0\ndb-0 u1 no")
    records = workload.read_records(tmp_path, 1000.0)
    assert [(r.pod_uid, r.pid, r.counter, r.t) for r in records] == [("u1", 42, 1, 0.5), ("u1", 42, 2, 1.0)]


def test_the_workload_script_survives_kubernetes_dollar_expansion() -> None:
    assert "$$$$" in workload.SCRIPT, "Kubernetes turns $$ into $: the shell's PID needs $$$$"
