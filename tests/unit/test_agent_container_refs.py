"""What the agent says about each container, checked against kubelet 1.32 (fake clock, hollow runtime):

- container events name the container as GenerateContainerRef does (involvedObject.fieldPath
  `spec.containers{NAME}`, `spec.initContainers{NAME}`, `spec.ephemeralContainers{NAME}`); pod events do not;
- every start is preceded by the image manager's Normal `Pulled` "already present on machine" event;
- `containerID` is the latest instance's in every state convertContainerStatus reports one in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelite.agent.pod_containers import field_path
from kubelite.agent.pod_status import container_status
from kubelite.agent.records import Record
from kubelite.agent.runtime.interface import Exit, Handle
from kubelite.client.events import event_for
from tests.unit.test_pod_worker import Harness, _c, _delete, _pod, _start

Obj = dict[str, Any]


def _events(h: Harness) -> list[tuple[str, str, str]]:
    """(reason, message, fieldPath) of every event so far."""
    return [(reason, message, path) for (_, reason, message), path in zip(h.events, h.event_paths, strict=True)]


@pytest.mark.parametrize("kind,want", [
    pytest.param("app", "spec.containers{c}", id="regular container"),
    pytest.param("init", "spec.initContainers{c}", id="init container"),
    pytest.param("sidecar", "spec.initContainers{c}", id="sidecar is an init container"),
    pytest.param("ephemeral", "spec.ephemeralContainers{c}", id="ephemeral container"),
])
def test_field_path_names_the_containers_list(kind: str, want: str) -> None:
    assert field_path(Record({"name": "c", "image": "x"}, kind)) == want


@pytest.mark.parametrize("path,want", [
    pytest.param("spec.containers{c}", {"fieldPath": "spec.containers{c}"}, id="container event has fieldPath"),
    pytest.param("", {}, id="pod event omits fieldPath"),
])
def test_event_for_sets_field_path(path: str, want: Obj) -> None:
    pod = {"apiVersion": "v1", "metadata": {"name": "p", "namespace": "default", "uid": "u1"}}
    ref = event_for(pod, "Started", "Started container c", "Pod", "kubelet", 0.0, field_path=path)["involvedObject"]
    assert {k: v for k, v in ref.items() if k == "fieldPath"} == want


async def test_start_events_name_their_container(tmp_path: Path) -> None:
    """Init container, sidecar, then the app: each one's Pulled, Created, Started about that container."""
    h = Harness(tmp_path)
    side = _c("side", restartPolicy="Always")
    _, task = await _start(h, _pod([_c("main")], init=[_c("one", "--run", "1"), side]))
    for _ in range(3):
        await h.clock.advance(1)
    got = [(reason, path) for reason, _, path in _events(h) if reason in ("Pulled", "Created", "Started")]
    assert got == [(reason, f"spec.{where}{{{name}}}")
                   for where, name in (("initContainers", "one"), ("initContainers", "side"), ("containers", "main"))
                   for reason in ("Pulled", "Created", "Started")]
    task.cancel()


@pytest.mark.parametrize("args,reason,message", [
    pytest.param(("--run", "1", "--exit", "1"), "BackOff", "Back-off restarting failed container main in pod "
                 "p_default(u1)", id="BackOff is about the container"),
    pytest.param((), "Killing", "Stopping container main", id="Killing is about the container"),
])
async def test_other_container_events_name_their_container(tmp_path: Path, args: tuple[str, ...], reason: str,
                                                           message: str) -> None:
    h = Harness(tmp_path)
    pod, task = await _start(h, _pod([_c("main", *args)], grace=1))
    await h.clock.advance(2)
    if reason == "Killing":
        await _delete(pod, h)
        await h.clock.advance(2)
    assert (reason, message, "spec.containers{main}") in _events(h)
    task.cancel()


async def test_config_error_is_about_the_container_and_follows_pulled(tmp_path: Path) -> None:
    """startContainer: EnsureImageExists before generateContainerConfig, so Pulled, then Failed."""
    h = Harness(tmp_path)
    _, task = await _start(h, _pod([{"name": "main", "image": "nothing-known"}]))
    got = [(reason, path) for reason, _, path in _events(h)][:2]
    assert got == [("Pulled", "spec.containers{main}"), ("Failed", "spec.containers{main}")]
    task.cancel()


@pytest.mark.parametrize("policy", [
    pytest.param("IfNotPresent", id="IfNotPresent: present, no pull"),
    pytest.param("Never", id="Never: present, no pull"),
    pytest.param("Always", id="Always: kubelite never pulls, says only what is true"),
    pytest.param(None, id="no policy"),
])
async def test_pulled_precedes_every_start(tmp_path: Path, policy: str | None) -> None:
    h = Harness(tmp_path)
    spec = _c("main", "--run", "1", "--exit", "1")
    spec["image"] = "registry.example/app:1.0"
    if policy:
        spec["imagePullPolicy"] = policy
    _, task = await _start(h, _pod([spec]))
    await h.clock.advance(1)
    await h.clock.advance(0)
    got = [(reason, message) for reason, message, _ in _events(h) if reason in ("Pulled", "Created", "Started")]
    pulled = ("Pulled", 'Container image "registry.example/app:1.0" already present on machine')
    start = [pulled, ("Created", "Created container main"), ("Started", "Started container main")]
    assert got == start + start  # the first start and the restart after the exit
    task.cancel()


def _handle(pid: int, code: int | None) -> Handle:
    h = Handle(pid, 0.0)
    if code is not None:
        h.finish(Exit(code))
    return h


@pytest.mark.parametrize("pid,code,waiting,last,want", [
    pytest.param(7, None, "", None, "kubelite://7", id="running"),
    pytest.param(7, 0, "", None, "kubelite://7", id="terminated keeps its ID"),
    pytest.param(7, 1, "CrashLoopBackOff", None, "kubelite://7", id="CrashLoopBackOff keeps the latest ID"),
    pytest.param(7, 1, "PostStartHookError", None, "kubelite://7", id="PostStartHookError keeps the latest ID"),
    pytest.param(None, 0, "", {"containerID": "kubelite://9"}, "kubelite://9",
                 id="after an agent restart, the ID its termination recorded"),
    pytest.param(None, None, "ContainerCreating", None, None, id="never had an instance: no ID"),
])
def test_container_id_is_the_latest_instances(pid: int | None, code: int | None, waiting: str, last: Obj | None,
                                              want: str | None) -> None:
    r = Record({"name": "main", "image": "x"}, "app", process=None if pid is None else _handle(pid, code),
               exit=None if code is None else Exit(code), waiting=waiting, last_terminated=last)
    assert container_status(r).get("containerID") == want
