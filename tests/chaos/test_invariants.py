"""Each invariant checker against synthetic observations: the violating case must be reported (so the
checker can fail), the safe neighbour must not. One table per checker, cases named after what they pin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubelite.testing.chaos import invariants
from kubelite.testing.chaos.invariants import CHECKERS, FENCING, STORAGE, run_checkers
from kubelite.testing.chaos.observations import (
    Fence,
    FileRecord,
    MountSample,
    Observations,
    PodSample,
    ProcSample,
    Removal,
    Window,
)


def proc(t: float, identity: str, uid: str, node: str = "node-a", pid: int = 100,
         stateful: bool = True) -> ProcSample:
    return ProcSample(t, pid, identity, uid, node, stateful)


def pod(t: float, uid: str, deleted: float | None = None, grace: int | None = None, node: str = "node-a",
        name: str = "db-0") -> PodSample:
    return PodSample(t, uid, name, node, deleted, grace)


def rec(identity: str, uid: str, t: float, node: str = "node-a") -> FileRecord:
    return FileRecord(identity, uid, node, 1, int(t * 2), t)


Case = tuple[str, Observations, int]


def _run(check: Callable[[Observations], list[invariants.Violation]], obs: Observations, want: int) -> None:
    got = check(obs)
    assert len(got) == want, got
    assert all(v.message for v in got)


AT_MOST_ONCE_PROCESSES: list[Case] = [
    ("two pods of one identity alive at one sample", Observations(procs=[
        proc(1.0, "db-0", "u1"), proc(1.0, "db-0", "u2", node="node-b")]), 1),
    ("the old pod dead before the new one starts", Observations(procs=[
        proc(1.0, "db-0", "u1"), proc(1.25, "db-0", "u2", node="node-b")]), 0),
    ("two processes of one pod (a fork) are one instance", Observations(procs=[
        proc(1.0, "db-0", "u1", pid=1), proc(1.0, "db-0", "u1", pid=2)]), 0),
    ("different identities side by side", Observations(procs=[
        proc(1.0, "db-0", "u1"), proc(1.0, "db-1", "u2")]), 0),
    ("Deployment pods may overlap (S6)", Observations(procs=[
        proc(1.0, "web-x", "u1", stateful=False), proc(1.0, "web-x", "u2", stateful=False)]), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), AT_MOST_ONCE_PROCESSES, ids=[c[0] for c in AT_MOST_ONCE_PROCESSES])
def test_at_most_once_processes(name: str, obs: Observations, want: int) -> None:
    _run(invariants.at_most_once_processes, obs, want)


AT_MOST_ONCE_FILES: list[Case] = [
    ("a second instance writes while the first still does", Observations(files=[
        rec("db-0", "u1", 1.0), rec("db-0", "u2", 2.0), rec("db-0", "u1", 3.0)]), 1),
    ("the second instance starts after the first's last write", Observations(files=[
        rec("db-0", "u1", 1.0), rec("db-0", "u1", 2.0), rec("db-0", "u2", 2.5)]), 0),
    ("one instance only", Observations(files=[rec("db-0", "u1", 1.0), rec("db-0", "u1", 9.0)]), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), AT_MOST_ONCE_FILES, ids=[c[0] for c in AT_MOST_ONCE_FILES])
def test_at_most_once_files(name: str, obs: Observations, want: int) -> None:
    _run(invariants.at_most_once_files, obs, want)


ACKNOWLEDGED: list[Case] = [
    ("an acknowledged write missing after recovery", Observations(acked_writes={"a", "b"}, final_writes={"a"}), 1),
    ("the writes could not be read back at all", Observations(acked_writes={"a"}, final_writes=None), 1),
    ("every acknowledged write readable; unacknowledged extras are fine",
     Observations(acked_writes={"a"}, final_writes={"a", "z"}), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), ACKNOWLEDGED, ids=[c[0] for c in ACKNOWLEDGED])
def test_acknowledged_writes_kept(name: str, obs: Observations, want: int) -> None:
    _run(invariants.acknowledged_writes_kept, obs, want)


GRACE: list[Case] = [
    ("grace lengthened by a later DELETE", Observations(pods=[pod(1, "u1", 31, 30), pod(2, "u1", 61, 60)]), 1),
    ("deadline moved later with the same grace", Observations(pods=[pod(1, "u1", 10, 5), pod(2, "u1", 15, 5)]), 1),
    ("grace shortened", Observations(pods=[pod(1, "u1", 31, 30), pod(2, "u1", 7, 5)]), 0),
    ("grace unchanged", Observations(pods=[pod(1, "u1", 6, 5), pod(2, "u1", 6, 5)]), 0),
    ("grace set for the first time", Observations(pods=[pod(1, "u1"), pod(2, "u1", 6, 5)]), 0),
    ("lengthened after a shortening, compared with the shortest", Observations(pods=[
        pod(1, "u1", 31, 30), pod(2, "u1", 7, 5), pod(3, "u1", 22, 20)]), 1),
]


@pytest.mark.parametrize(("name", "obs", "want"), GRACE, ids=[c[0] for c in GRACE])
def test_grace_never_lengthened(name: str, obs: Observations, want: int) -> None:
    _run(invariants.grace_never_lengthened, obs, want)


KILLED: list[Case] = [
    ("alive well past the deadline on an undisturbed node", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(6 + invariants.KILL_SLACK + 1, "db-0", "u1")]), 1),
    ("dead within the deadline plus slack", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(6 + invariants.KILL_SLACK - 0.5, "db-0", "u1")]), 0),
    ("alive past the deadline while its node was partitioned", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(12, "db-0", "u1")], faults=[Window(0, 20, "drop", "node-a")]), 0),
    ("alive after the partition healed, within reconnect slack and grace", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(20 + invariants.RECONNECT_SLACK + 5, "db-0", "u1")],
        faults=[Window(0, 20, "drop", "node-a")]), 0),
    ("alive long after the partition healed (the agent never saw the deletion)", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(20 + invariants.RECONNECT_SLACK + 5 + invariants.KILL_SLACK + 1,
                                               "db-0", "u1")],
        faults=[Window(0, 20, "drop", "node-a")]), 1),
    ("alive past the deadline while the server was down", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(12, "db-0", "u1")], faults=[Window(2, 4, "server_kill", "server")]), 0),
    ("another node's fault does not excuse it", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(12, "db-0", "u1")], faults=[Window(0, 20, "drop", "node-b")]), 1),
    ("deleted just after a half-open link healed: the agent's old connections stay dead until a heartbeat "
     "notices", Observations(pods=[pod(1, "u1", 6, 5)], procs=[proc(12, "db-0", "u1")],
                             faults=[Window(-3, 0, "half_open", "node-a")]), 0),
    ("deleted just after a cut healed: the agent reconnected at once", Observations(
        pods=[pod(1, "u1", 6, 5)], procs=[proc(12, "db-0", "u1")], faults=[Window(-3, 0, "cut", "node-a")]), 1),
    ("a half-open link long healed does not excuse it", Observations(
        pods=[pod(30, "u1", 35, 5)], procs=[proc(41, "db-0", "u1")], faults=[Window(-3, 0, "half_open", "node-a")]), 1),
]


@pytest.mark.parametrize(("name", "obs", "want"), KILLED, ids=[c[0] for c in KILLED])
def test_killed_within_grace(name: str, obs: Observations, want: int) -> None:
    _run(invariants.killed_within_grace, obs, want)


REMOVED: list[Case] = [
    ("object gone while its process still runs", Observations(
        pods=[pod(1, "u1")], pod_list_times=[1, 2], procs=[proc(1, "db-0", "u1"), proc(3, "db-0", "u1")]), 1),
    ("process dead before the object went", Observations(
        pods=[pod(1, "u1")], pod_list_times=[1, 2], procs=[proc(1, "db-0", "u1")]), 0),
    ("the object still listed at the end", Observations(
        pods=[pod(1, "u1"), pod(3, "u1")], pod_list_times=[1, 3], procs=[proc(3, "db-0", "u1")]), 0),
    ("no later list (the server down): nothing known", Observations(
        pods=[pod(1, "u1")], pod_list_times=[1], procs=[proc(5, "db-0", "u1")]), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), REMOVED, ids=[c[0] for c in REMOVED])
def test_removed_only_when_dead(name: str, obs: Observations, want: int) -> None:
    _run(invariants.removed_only_when_dead, obs, want)


def removal(t: float = 4.0, node: str = "node-a", running: bool = True) -> Removal:
    return Removal(t, "u1", "db-0", node, 0, running)


FENCE: list[Case] = [
    ("force deleted while the API showed it running, no fence", Observations(removals=[removal()]), 1),
    ("force deleted while shown running, after a confirmed fence of its node", Observations(
        removals=[removal()], fences=[Fence(3.0, "node-a")]), 0),
    ("a fence of another node does not count", Observations(removals=[removal()], fences=[Fence(3.0, "node-b")]), 1),
    ("a fence confirmed only after the deletion does not count", Observations(
        removals=[removal()], fences=[Fence(4.5, "node-a")]), 1),
    ("a fence cleared before the deletion does not count", Observations(
        removals=[removal()], fences=[Fence(1.0, "node-a", cleared=2.0)]), 1),
    ("a fence cleared after the deletion still covers it", Observations(
        removals=[removal()], fences=[Fence(1.0, "node-a", cleared=9.0)]), 0),
    ("the agent's delete after its terminal status is no force delete", Observations(
        removals=[removal(running=False)]), 0),
    ("a pod bound to no node runs nowhere", Observations(removals=[removal(node="")]), 0),
    ("processes seen just before a removal are not evidence (every prompt agent delete looks so)", Observations(
        pods=[pod(1, "u1")], pod_list_times=[1, 2], procs=[proc(1.9, "db-0", "u1")],
        removals=[removal(1.95, running=False)]), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), FENCE, ids=[c[0] for c in FENCE])
def test_force_delete_needs_fence(name: str, obs: Observations, want: int) -> None:
    _run(invariants.force_delete_needs_fence, obs, want)


RWO: list[Case] = [
    ("one volume mounted on two nodes at one sample", Observations(mounts=[
        MountSample(1, "pv-1", "node-a"), MountSample(1, "pv-1", "node-b")]), 1),
    ("the volume moves between samples", Observations(mounts=[
        MountSample(1, "pv-1", "node-a"), MountSample(2, "pv-1", "node-b")]), 0),
    ("two volumes on two nodes", Observations(mounts=[
        MountSample(1, "pv-1", "node-a"), MountSample(1, "pv-2", "node-b")]), 0),
]


@pytest.mark.parametrize(("name", "obs", "want"), RWO, ids=[c[0] for c in RWO])
def test_rwo_single_node(name: str, obs: Observations, want: int) -> None:
    _run(invariants.rwo_single_node, obs, want)


def test_checkers_missing_a_capability_are_skipped_with_their_reason_not_passed() -> None:
    violating = Observations(mounts=[MountSample(1, "pv-1", "node-a"), MountSample(1, "pv-1", "node-b")],
                             acked_writes=set(), final_writes=set())
    violations, skipped = run_checkers(violating, set())
    assert not [v for v in violations if v.invariant == "rwo-single-node"]
    assert any(s.startswith("rwo-single-node") and "skipped" in s for s in skipped)
    assert any(s.startswith("force-delete-needs-fence") for s in skipped)
    violations, skipped = run_checkers(violating, {STORAGE, FENCING}, frozenset())
    assert not violations and all("nothing collects" in s for s in skipped), "an API alone is not observation"
    violations, skipped = run_checkers(violating, {STORAGE, FENCING}, frozenset({STORAGE, FENCING}))
    assert [v.invariant for v in violations] == ["rwo-single-node"] and not skipped


def test_every_checker_has_a_table() -> None:
    tested = {"at-most-once-processes", "at-most-once-files", "acknowledged-writes-kept", "grace-never-lengthened",
              "killed-within-grace", "removed-only-when-dead", "force-delete-needs-fence", "rwo-single-node"}
    assert {c.name for c in CHECKERS} == tested

