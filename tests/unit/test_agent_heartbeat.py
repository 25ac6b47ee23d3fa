"""The agent's heartbeats on a fake clock: the Lease every 10 s, the full node status every 5 minutes."""

from __future__ import annotations

import asyncio
import copy
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.config import NodeConfigError
from kubelite.agent.config import parse as parse_node_config
from kubelite.agent.eviction.node_status import no_pressure
from kubelite.agent.eviction.thresholds import DISK_PRESSURE
from kubelite.agent.node import NodeReporter, _detached
from kubelite.agent.volumes.claims import LOCAL_PATH_DIR, ClaimVolumes
from kubelite.api import volumes as vu
from kubelite.api.errors import ApiError
from kubelite.clock import FakeClock, rfc3339
from tests.controllers.fakecluster import Cluster, cluster

__all__ = ["cluster"]

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
NODE_STATUS = "/api/v1/nodes/n1/status"


class RecordingClient:
    """Records the agent's writes and keeps the Node as they leave it; the first Lease renewal finds no Lease
    (404), as on a new node."""

    def __init__(self, clock: FakeClock, ready: str = "True") -> None:
        self.clock = clock
        self.writes: list[tuple[float, str, str]] = []
        self.ready = ready  # the node's Ready condition as the API shows it (the node lifecycle controller's)
        self.node: dict[str, Any] = {"status": {}}

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        node = copy.deepcopy(self.node)
        for c in node["status"].get("conditions") or []:
            if c["type"] == "Ready":
                c["status"] = self.ready
        return node

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        self.writes.append((self.clock.monotonic(), "patch", path))
        if path.startswith(LEASE) and not any(kind == "create" for _, kind, p in self.writes if p.startswith(LEASE)):
            raise ApiError(404, "NotFound", "leases not found")
        if path == NODE_STATUS:  # a strategic merge: conditions by type, the rest replaced
            status = self.node["status"]
            conditions = {c["type"]: c for c in [*(status.get("conditions") or []), *body["status"]["conditions"]]}
            status.update({**copy.deepcopy(body["status"]), "conditions": list(conditions.values())})
        return {}

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        self.writes.append((self.clock.monotonic(), "create", path))
        if path == "/api/v1/nodes":
            self.node = copy.deepcopy(body)
        return body  # type: ignore[no-any-return]


@pytest.mark.parametrize("name,lease_seconds,path,kinds,want_times", [
    ("the lease is created, then renewed every 10 s", 40, LEASE, ("create", "patch"),
     [0.0, 0.0, 10.0, 20.0, 30.0]),
    ("the node status is posted every 5 minutes", 40, "/api/v1/nodes/n1/status", ("patch",), [300.0, 600.0]),
    ("a 240 s lease (nodeLeaseDurationSeconds) is renewed every quarter of it", 240, LEASE, ("create", "patch"),
     [0.0, 0.0, 60.0, 120.0, 180.0]),
])
async def test_heartbeats(tmp_path: Path, name: str, lease_seconds: int, path: str, kinds: tuple[str, ...],
                          want_times: list[float]) -> None:
    clock = FakeClock()
    client = RecordingClient(clock)
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        lease_seconds=lease_seconds)
    await node.register()
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    for _ in range(60):
        await clock.advance(10)
    task.cancel()
    times = [t for t, kind, p in client.writes if p.startswith(path) and kind in kinds]
    assert times[:len(want_times)] == want_times


async def test_status_is_posted_at_once_when_the_node_is_shown_not_ready() -> None:
    """A node the node lifecycle controller marked Unknown (its agent was silent) posts its real status
    on the next heartbeat, not 5 minutes later, as kubelet posts when the stored status differs."""
    clock = FakeClock()
    client = RecordingClient(clock)
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0)  # type: ignore[arg-type]
    await node.register()
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    await clock.advance(10)
    client.ready = "Unknown"
    await clock.advance(10)
    task.cancel()
    assert [t for t, _, p in client.writes if p == "/api/v1/nodes/n1/status"] == [20.0]


@pytest.mark.parametrize("value,want", [
    pytest.param(None, 40, id="absent: upstream's 40 s"),
    pytest.param(240, 240, id="a positive integer is taken"),
    pytest.param(0, "must be a positive integer", id="zero is refused"),
    pytest.param("40s", "must be a positive integer", id="a duration string is refused (the field is seconds)"),
    pytest.param(True, "must be a positive integer", id="a boolean is refused"),
])
def test_node_lease_duration_seconds_is_parsed(value: object, want: int | str) -> None:
    raw: dict[str, Any] = {"kind": "KubeletConfiguration"}
    if value is not None:
        raw["nodeLeaseDurationSeconds"] = value
    if isinstance(want, int):
        assert parse_node_config(raw).node_lease_duration == want
    else:
        with pytest.raises(NodeConfigError, match=want):
            parse_node_config(raw)


async def test_the_lease_carries_its_duration() -> None:
    clock = FakeClock()
    bodies: list[Any] = []

    class Capturing(RecordingClient):
        async def create(self, path: str, body: Any) -> dict[str, Any]:
            bodies.append(body)
            return await super().create(path, body)

    node = NodeReporter(Capturing(clock), clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        lease_seconds=240)
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    task.cancel()
    assert [b["spec"]["leaseDurationSeconds"] for b in bodies if b.get("kind") == "Lease"] == [240]


@pytest.mark.parametrize("name,renewals", [
    ("two nodes renewing at one instant: one renewTime", [("n1", 0.0), ("n2", 0.0)]),
    ("a renewal a microsecond later: its own renewTime", [("n1", 0.0), ("n2", 0.000001), ("n1", 0.000001)]),
    ("back to an earlier instant (another clock): that instant's", [("n1", 5.5), ("n2", 0.25)]),
])
async def test_each_renewal_carries_the_time_it_was_sent(name: str, renewals: list[tuple[str, float]]) -> None:
    """The Lease's renewTime is the MicroTime of the renewal (clock.micro_time remembers the last one formatted,
    for the nodes of a simulation that renew at the same virtual instant)."""
    sent: list[tuple[str, str]] = []
    want: list[tuple[str, str]] = []
    for node_name, at in renewals:
        clock = FakeClock(start=1_800_000_000.0 + at)

        class Capturing(RecordingClient):
            async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
                sent.append((path.rsplit("/", 1)[1], body["spec"]["renewTime"]))
                return {}

        await NodeReporter(Capturing(clock), clock, node_name, "127.0.0.1", {}, lambda: 0).renew_lease()  # type: ignore[arg-type]
        # formatted here, not by micro_time: its memo is what this checks
        want.append((node_name, datetime.fromtimestamp(clock.now(), tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
    assert sent == want


async def test_a_heartbeat_through_after_failures_tells_the_informers_to_retry_now() -> None:
    clock = FakeClock()
    client = RecordingClient(clock)
    told: list[float] = []
    failing = [True]

    async def renew(*_: Any) -> dict[str, Any]:
        if failing[0]:
            raise ApiError(503, "ServiceUnavailable", "cut")
        return {}
    client.patch = renew  # type: ignore[method-assign]
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        reconnected=lambda: told.append(clock.monotonic()))
    task = asyncio.ensure_future(node.heartbeat())
    for _ in range(30):
        await clock.advance(1)
    assert told == [], "told while the heartbeats still failed"
    failing[0] = False
    for _ in range(60):
        await clock.advance(1)
    task.cancel()
    assert len(told) == 1, told


class CountingClaims(ClaimVolumes):
    """The real local-path reclaim, counting the times a heartbeat started it."""

    started = 0

    async def reclaim(self, node: dict[str, Any]) -> None:
        self.started += 1
        await super().reclaim(node)


@pytest.mark.parametrize("annotations,started,deleted,answered", [
    pytest.param({}, 0, False, None, id="a Node that asks nothing: the reclaim is not started"),
    pytest.param({vu.ANN_LOCAL_PATH_DELETE: "pv-1"}, 1, True, "pv-1",
                 id="a Node asking for a directory's deletion: deleted after the renewal, and answered"),
    pytest.param({vu.ANN_LOCAL_PATH_DELETED: "pv-1"}, 1, False, "",
                 id="an answer to a request withdrawn: the reclaim is started, and clears it"),
])
async def test_heartbeat_reclaims_only_for_a_node_that_asks(tmp_path: Path, annotations: dict[str, str], started: int,
                                                            deleted: bool, answered: str | None) -> None:
    clock = FakeClock()
    answers: list[Any] = []

    class Answering(RecordingClient):
        async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
            if path == "/api/v1/nodes/n1":
                answers.append(body["metadata"]["annotations"][vu.ANN_LOCAL_PATH_DELETED])
            return await super().patch(path, body, content_type)

    client = Answering(clock)
    client.node = {"metadata": {"name": "n1", "annotations": annotations}, "status": {}}
    directory = tmp_path / LOCAL_PATH_DIR / "pv-1"
    directory.mkdir(parents=True)
    claims = CountingClaims(client, "n1", tmp_path)  # type: ignore[arg-type]
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0,  # type: ignore[arg-type]
                        reclaim=claims)
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    for _ in range(500):  # the directory is removed on a thread (asyncio.to_thread): real time
        if len(answers) == (answered is not None):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    assert claims.started == started
    assert directory.exists() != deleted
    assert answers == ([] if answered is None else [answered or None])


# --- report on change (kubelet's nodeStatusHasChanged), against a real API server --------------------

def _set_condition(kind: str, status: str) -> Callable[[dict[str, Any]], None]:
    def edit(node: dict[str, Any]) -> None:
        conditions = node["status"]["conditions"]
        conditions[:] = [c for c in conditions if c["type"] != kind]
        conditions.append({"type": kind, "status": status, "reason": "Edited", "lastHeartbeatTime": None,
                           "lastTransitionTime": None})
    return edit


def _unknown(node: dict[str, Any]) -> None:
    """As the node lifecycle controller writes a silent node."""
    for c in node["status"]["conditions"]:
        c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")


def _capacity(node: dict[str, Any]) -> None:
    node["status"]["capacity"]["pods"] = "1"


@pytest.mark.parametrize(("edit", "later", "report_due", "sent"), [
    pytest.param(None, 0.0, False, None, id="as registered, no report due: nothing to send"),
    pytest.param(None, 10.0, False, None, id="only the heartbeat time differs: nothing to send"),
    pytest.param(None, 300.0, True, {"conditions"}, id="a report is due: the conditions alone, fresh heartbeats"),
    pytest.param(_unknown, 10.0, False, {"conditions"},
                 id="marked Unknown by the node lifecycle controller: the conditions at once"),
    pytest.param(_capacity, 10.0, False, {"capacity", "conditions"}, id="capacity edited in the API: put back at once"),
    pytest.param(_set_condition("kubelite.io/Fenced", "True"), 10.0, False, None,
                 id="a condition the agent does not own is not compared"),
    pytest.param(_set_condition("DiskPressure", "True"), 10.0, False, {"conditions"},
                 id="a pressure condition that differs is put back"),
])
async def test_status_is_sent_when_it_differs_or_a_report_is_due(
        cluster: Cluster, edit: Callable[[dict[str, Any]], None] | None, later: float, report_due: bool,
        sent: set[str] | None) -> None:
    reporter = NodeReporter(cluster.client, cluster.clock, "n1", "127.0.0.1",
                            {"cpu": "4", "memory": "16Gi", "pods": "110"}, lambda: 0)
    await reporter.register()
    if edit is not None:
        node = await cluster.get("/api/v1/nodes/n1")
        edit(node)
        await cluster.client.request("PUT", NODE_STATUS, node)
    await cluster.clock.advance(later)
    patch = reporter.status_patch(await cluster.get("/api/v1/nodes/n1"), report_due)
    assert (None if patch is None else set(patch)) == sent
    if patch is not None:
        await reporter.post_status(patch)
        assert reporter.status_patch(await cluster.get("/api/v1/nodes/n1"), False) is None, \
            "after the patch the API shows the agent's status"


class _Agent:
    """What the agent's status is made of, changed between two heartbeats as the agent's would be."""

    def __init__(self, clock: FakeClock) -> None:
        self.capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        self.port = 10250
        self.pressure = no_pressure(rfc3339(clock.now()))

    def reporter(self, cluster: Cluster) -> NodeReporter:
        return NodeReporter(cluster.client, cluster.clock, "n1", "127.0.0.1", self.capacity, lambda: self.port,
                            lambda: self.pressure)


def _capacity_set(agent: _Agent) -> None:
    """In place, as a simulation sets its nodes' (kubelite/sim/runner.py)."""
    agent.capacity.clear()
    agent.capacity.update({"cpu": "8", "memory": "16Gi", "pods": "110"})


def _pressure_flipped(agent: _Agent) -> None:
    agent.pressure = tuple((c, c == DISK_PRESSURE, since) for c, _, since in agent.pressure)


def _port_set(agent: _Agent) -> None:
    agent.port = 10251


@pytest.mark.parametrize(("node_edit", "agent_edit", "report_due", "sent"), [
    pytest.param(None, None, False, None, id="nothing changed: nothing to send, however often the Node is read"),
    pytest.param(None, None, True, {"conditions"}, id="nothing changed, a report due: the conditions alone"),
    pytest.param(_unknown, None, False, {"conditions"},
                 id="marked Unknown by the node lifecycle controller since: the conditions at once"),
    pytest.param(_capacity, None, False, {"capacity", "conditions"}, id="capacity edited in the API since"),
    pytest.param(_set_condition("kubelite.io/Fenced", "True"), None, False, None,
                 id="a condition the agent does not own added since: still nothing to send"),
    pytest.param(None, _capacity_set, False, {"capacity", "allocatable", "conditions"},
                 id="the agent's capacity changed in place: capacity and allocatable"),
    pytest.param(None, _pressure_flipped, False, {"conditions"}, id="a pressure condition flipped: the conditions"),
    pytest.param(None, _port_set, False, {"daemonEndpoints", "conditions"}, id="the agent's port changed"),
])
async def test_a_node_found_showing_the_status_is_compared_again_when_either_side_changed(
        cluster: Cluster, node_edit: Callable[[dict[str, Any]], None] | None,
        agent_edit: Callable[[_Agent], None] | None, report_due: bool, sent: set[str] | None) -> None:
    """The heartbeat does not compare a Node with the uid and resourceVersion of the last one found showing the
    agent's status, as long as what that status is made of has not changed either (status_patch): a write to
    the Node by anyone, or a change of the agent's capacity, pressure or port, must still be put right."""
    agent = _Agent(cluster.clock)
    reporter = agent.reporter(cluster)
    await reporter.register()
    for _ in range(2):  # compared, then known to show the agent's status
        await cluster.clock.advance(60)
        assert reporter.status_patch(await cluster.get("/api/v1/nodes/n1"), False) is None
    if node_edit is not None:
        node = await cluster.get("/api/v1/nodes/n1")
        node_edit(node)
        await cluster.client.request("PUT", NODE_STATUS, node)
    if agent_edit is not None:
        agent_edit(agent)
    await cluster.clock.advance(60)
    patch = reporter.status_patch(await cluster.get("/api/v1/nodes/n1"), report_due)
    assert (None if patch is None else set(patch)) == sent
    if patch is None:
        return
    now = rfc3339(cluster.clock.now())
    assert {c["lastHeartbeatTime"] for c in patch["conditions"]} == {now}, "fresh heartbeats"
    assert patch == _detached({**{k: v for k, v in reporter._status().items() if k in sent}}), \
        "the fields that differ, as the agent has them"
    await reporter.post_status(patch)
    assert reporter.status_patch(await cluster.get("/api/v1/nodes/n1"), False) is None, \
        "after the patch the API shows the agent's status"


async def test_a_node_read_again_at_the_same_resource_version_is_not_compared_again(cluster: Cluster) -> None:
    """What makes the heartbeat cheaper: a uid and resourceVersion name one content of the Node, so what it
    says (here, a status no API server would have kept under that version) is not looked at again."""
    agent = _Agent(cluster.clock)
    reporter = agent.reporter(cluster)
    await reporter.register()
    node = await cluster.get("/api/v1/nodes/n1")
    assert reporter.status_patch(node, False) is None
    report = reporter.status_patch(node, True)
    assert report is not None and set(report) == {"conditions"}
    report["conditions"][0]["status"] = "True"  # what was handed on is the client's: the agent's is its own
    assert reporter.status_patch(node, True) == {"conditions": [{**c, "status": "False"} if i == 0 else c
                                                                for i, c in enumerate(report["conditions"])]}
    _unknown(node)
    assert reporter.status_patch(node, False) is None
    node["metadata"]["uid"] = "another"  # deleted and created again (on a server whose store was reset)
    assert reporter.status_patch(node, False) is not None, "another uid is another Node: compared"
    del node["metadata"]["resourceVersion"]
    assert reporter.status_patch(node, False) is not None, "a Node with no resourceVersion is always compared"


class _Node(dict[str, Any]):
    """A Node as read, that a weak reference can follow (a plain dict cannot be weakly referenced)."""


@pytest.mark.parametrize("renewal_fails", [
    pytest.param(False, id="heartbeats that go through"),
    pytest.param(True, id="heartbeats whose Lease renewal fails after the Node was read"),
])
async def test_no_node_read_is_held_while_the_heartbeat_sleeps(renewal_fails: bool) -> None:
    """The heartbeat lets go of each Node it read (and of its patch) before it sleeps, on every path: freed right
    away its objects are still in the CPU's caches, where a minute later — at thousands of nodes — they are not
    (BENCHMARKS.md, Idle agent, third pass)."""
    clock = FakeClock()
    client = RecordingClient(clock)
    reads: list[weakref.ref[_Node]] = []
    read, patch = client.get, client.patch

    async def get(path: str, params: Any = None) -> dict[str, Any]:
        node = _Node(await read(path, params))
        reads.append(weakref.ref(node))
        return node

    async def failing_patch(path: str, body: Any, *args: Any, **kwargs: Any) -> Any:
        if "/leases/" in path:
            raise ApiError(503, "ServiceUnavailable", "the server is shutting down")
        return await patch(path, body, *args, **kwargs)

    client.get = get  # type: ignore[method-assign]
    if renewal_fails:
        client.patch = failing_patch  # type: ignore[method-assign]
    node = NodeReporter(client, clock, "n1", "127.0.0.1", {"pods": "110"}, lambda: 0)  # type: ignore[arg-type]
    await node.register()
    task = asyncio.ensure_future(node.heartbeat())
    await clock.advance(0)
    for _ in range(3):
        await clock.advance(10)
        assert reads and all(ref() is None for ref in reads)
    task.cancel()
    assert len(reads) >= 4  # a heartbeat each 10 s, more often while they fail (the retry back-off)


@pytest.mark.parametrize("name,build", [
    ("the registered Node", lambda node: node.node_object()["status"]),
    ("a status report", lambda node: node.status_patch(None, True)),
])
def test_what_is_sent_shares_nothing_with_the_agent(name: str, build: Callable[[NodeReporter], Any]) -> None:
    """A status handed to the client is the agent's, copied (`_detached`): capacity and allocatable are one dict
    in the agent and two in the API, and a server that merged the patch's values into the stored Node (an
    in-process one does) must never reach back into the agent's."""
    capacity = {"cpu": "4", "pods": "110"}
    node = NodeReporter(None, FakeClock(), "n1", "127.0.0.1", capacity, lambda: 10250)  # type: ignore[arg-type]
    status = build(node)
    assert status["capacity"] == status["allocatable"] == capacity
    status["capacity"]["cpu"] = "8"
    status["addresses"][0]["address"] = "10.0.0.9"
    status["conditions"][0]["status"] = "True"
    again = build(node)
    assert (capacity["cpu"], again["allocatable"]["cpu"], again["addresses"][0]["address"]) == ("4", "4", "127.0.0.1")
    assert again["conditions"][0]["status"] == "False"


# --- kubelet's events about its Node ---------------------------------------------------------------------------

def _conditions(**status: str) -> list[dict[str, Any]]:
    return [{"type": kind, "status": value} for kind, value in status.items()]


AGENT_REPORT = _conditions(MemoryPressure="False", DiskPressure="False", PIDPressure="False", Ready="True")


@pytest.mark.parametrize(("stored", "want"), [
    pytest.param([], ["NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"],
                 id="a new Node: each pressure condition's event, no NodeReady (Ready had no status before)"),
    pytest.param(AGENT_REPORT, [], id="a Node showing the same statuses: no event"),
    pytest.param(_conditions(MemoryPressure="Unknown", DiskPressure="Unknown", PIDPressure="Unknown",
                             Ready="Unknown"),
                 ["NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"],
                 id="marked Unknown by the node lifecycle controller: every condition's event, NodeReady too"),
    pytest.param(_conditions(MemoryPressure="False", DiskPressure="False", PIDPressure="False", Ready="False"),
                 ["NodeReady"], id="a Node shown not ready: NodeReady alone"),
    pytest.param(_conditions(MemoryPressure="True", DiskPressure="False", PIDPressure="False", Ready="True"), [],
                 id="a pressure flip between True and False is not this report's (the eviction manager records it)"),
])
def test_reported_conditions_record_kubelets_setter_events(stored: list[dict[str, Any]], want: list[str]) -> None:
    from kubelite.agent.eviction.node_status import reported_condition_events

    assert reported_condition_events(stored, AGENT_REPORT) == want


def _node_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    ref = {"kind": "Node", "name": "n1", "uid": "n1"}  # kubelet's nodeRef: the node's name as its uid
    assert all({k: e["involvedObject"][k] for k in ref} == ref
               and e["source"] == {"component": "kubelet", "host": "n1"} for e in events), events
    return [(e["reason"], e["message"]) for e in events]


async def test_a_node_records_kubelets_events_as_it_starts_and_comes_back(cluster: Cluster) -> None:
    """`kubectl describe node` shows kubelet's Starting and condition events: as the agent registers its Node (at
    every start: kubelet's setters run on a fresh Node before registering), and again when a heartbeat finds the
    Node marked Unknown (NodeReady among them)."""
    events: list[dict[str, Any]] = []
    start = [("Starting", "Starting kubelet.")]
    came_up = [(e, f"Node n1 status is now: {e}")
               for e in ("NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID")]

    def reporter() -> NodeReporter:
        return NodeReporter(cluster.client, cluster.clock, "n1", "127.0.0.1", {"cpu": "4", "pods": "110"},
                            lambda: 0, post_event=events.append)

    await reporter().register()
    assert _node_events(events) == start + came_up
    events.clear()
    await reporter().register()  # an agent restarted: the Node is there, showing its status
    assert _node_events(events) == start + came_up
    events.clear()
    node = await cluster.get("/api/v1/nodes/n1")
    _unknown(node)
    await cluster.client.request("PUT", NODE_STATUS, node)
    task = asyncio.ensure_future(reporter().heartbeat())
    for _ in range(100):  # the first heartbeat's requests go through the real server's handlers
        await cluster.clock.advance(0)
        if len(events) == 4:
            break
    task.cancel()
    assert _node_events(events) == [*came_up, ("NodeReady", "Node n1 status is now: NodeReady")]
