"""The agent's pod status writes are two-way strategic merge patches (kubelet's PatchPodStatus →
strategicpatch.CreateTwoWayMergePatch): a key the new status no longer has is deleted on the server.

The diff's cases are named after upstream's TwoWay test cases (strategicpatch/patch_test.go), each checked two
ways: the patch itself, and that the server's strategic merge turns the old status into the new one. Then a
real API server (SQLite file) and the real status manager: the stale condition reason of the QA report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.status_manager import StatusManager
from kubelite.agent.status_patch import two_way_patch
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.apiserver.patch import strategic_merge_patch
from kubelite.clock import RealClock

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
NOT_READY = {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "message": "containers with unready status: [c]"}
READY = {"type": "Ready", "status": "True"}
INIT = {"type": "Initialized", "status": "True"}


@pytest.mark.parametrize("original,modified,want", [
    pytest.param({"phase": "Pending"}, {"phase": "Pending"}, {}, id="nothing changed: an empty patch"),
    pytest.param({"phase": "Pending"}, {"phase": "Running", "startTime": "t"}, {"phase": "Running", "startTime": "t"},
                 id="add a new field and change a field"),
    pytest.param({"phase": "Failed", "reason": "Evicted", "message": "old"}, {"phase": "Failed"},
                 {"reason": None, "message": None}, id="delete fields: null"),
    pytest.param({"conditions": [INIT, NOT_READY]}, {"conditions": [INIT, READY]},
                 {"conditions": [{"type": "Ready", "status": "True", "reason": None, "message": None}],
                  "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}]},
                 id="merge list: a changed element sends its merge key, its changes and nulls, and the order"),
    pytest.param({"conditions": [INIT]}, {"conditions": [INIT, READY]},
                 {"conditions": [READY], "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}]},
                 id="merge list: add an element"),
    pytest.param({"conditions": [INIT, READY]}, {"conditions": [READY]},
                 {"conditions": [{"$patch": "delete", "type": "Initialized"}],
                  "$setElementOrder/conditions": [{"type": "Ready"}]},
                 id="merge list: delete an element with the delete directive"),
    pytest.param({"conditions": [INIT, READY]}, {"conditions": [READY, INIT]},
                 {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "Initialized"}]},
                 id="merge list: order changed only: the order directive alone"),
    pytest.param({"podIPs": [{"ip": "10.0.0.1"}]}, {"podIPs": [{"ip": "10.0.0.2"}]},
                 {"podIPs": [{"ip": "10.0.0.2"}, {"$patch": "delete", "ip": "10.0.0.1"}],
                  "$setElementOrder/podIPs": [{"ip": "10.0.0.2"}]},
                 id="merge list by ip: replaced address"),
    pytest.param({"containerStatuses": [{"name": "c", "ready": False, "state": {"waiting": {"reason": "X"}}}]},
                 {"containerStatuses": [{"name": "c", "ready": True, "state": {"running": {"startedAt": "t"}}}]},
                 {"containerStatuses": [{"name": "c", "ready": True, "state": {"running": {"startedAt": "t"}}}]},
                 id="atomic list (no patch strategy in types.go): replaced whole"),
    pytest.param({"conditions": []}, {"conditions": [READY]}, {"conditions": [READY],
                                                               "$setElementOrder/conditions": [{"type": "Ready"}]},
                 id="merge list: from empty"),
])
def test_two_way_patch(original: Obj, modified: Obj, want: Obj) -> None:
    patch = two_way_patch(original, modified)
    assert patch == want
    assert strategic_merge_patch(original, patch, "V1PodStatus") == modified


async def _acknowledged(manager: StatusManager, uid: str) -> None:
    for _ in range(200):
        if manager.synced(uid):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not acknowledged in time")


@pytest.mark.parametrize("before,after,others", [
    pytest.param({"phase": "Running", "conditions": [INIT, NOT_READY]},
                 {"phase": "Running", "conditions": [INIT, READY]}, {},
                 id="readiness passing: Ready=True keeps no ContainersNotReady reason or message"),
    pytest.param({"phase": "Failed", "reason": "DeadlineExceeded", "message": "old"}, {"phase": "Failed"},
                 {}, id="a failed pod's old reason and message go"),
    pytest.param({"phase": "Running", "conditions": [NOT_READY]}, {"phase": "Running", "conditions": [READY]},
                 {"nominatedNodeName": "n2", "conditions": [{"type": "DisruptionTarget", "status": "True"}]},
                 id="what others wrote stays: a scheduler's nominatedNodeName and a DisruptionTarget condition"),
])
@pytest.mark.parametrize("restarted", [pytest.param(False, id="same agent"),
                                       pytest.param(True, id="agent restarted between the writes")])
async def test_status_writes_leave_nothing_stale(inprocess_server: ApiServer, tmp_path: Path, before: Obj,
                                                 after: Obj, others: Obj, restarted: bool) -> None:
    client = InProcessClient(inprocess_server)
    pod = await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}})
    api: Obj = {}  # the object as the agent's informer has it
    uid = pod["metadata"]["uid"]
    manager = StatusManager(client, RealClock(), lambda ns, name: api.get(name))
    sender = asyncio.ensure_future(manager.run())
    try:
        manager.set_status(pod, before)
        await _acknowledged(manager, uid)
        api["p"] = await client.get(f"{PODS}/p")
        if others:  # another writer (scheduler, disruption controller) patches the status meanwhile
            await client.patch(f"{PODS}/p/status", {"status": others}, "application/strategic-merge-patch+json")
            api["p"] = await client.get(f"{PODS}/p")
        if restarted:
            sender.cancel()
            manager = StatusManager(client, RealClock(), lambda ns, name: api.get(name))
            sender = asyncio.ensure_future(manager.run())
        manager.set_status(pod, after)
        await _acknowledged(manager, uid)
    finally:
        sender.cancel()
    held = (await client.get(f"{PODS}/p"))["status"]
    own = {c["type"] for c in after.get("conditions", [])}
    # qosClass: the server's
    assert {k: v for k, v in held.items() if k not in ("conditions", "qosClass", *others)} == {
        k: v for k, v in after.items() if k != "conditions"}
    assert [c for c in held.get("conditions", []) if c["type"] in own] == after.get("conditions", [])
    for key, value in others.items():
        if key == "conditions":
            assert [c for c in held["conditions"] if c["type"] not in own] == value
        else:
            assert held[key] == value
