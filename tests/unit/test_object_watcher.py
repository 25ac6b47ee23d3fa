"""The watch-based ConfigMap/Secret manager (kubelite/agent/volumes/objects.py) against a fake API that serves one
collection per path and streams watch events pushed by the test: one single-object watch per referenced object,
shared by the pods that use it and stopped with the last one; reads wait for the first list; changes (creation of a
missing object included) are reported; and the references a pod spec makes (podutil's visitors)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from kubelite.agent.container import ConfigError
from kubelite.agent.volumes.objects import ObjectWatcher, Ref, referenced_objects
from kubelite.clock import FakeClock

Obj = dict[str, Any]


class FakeApi:
    """Lists answer `objects[path]`; each watch streams what `push` sends to its path."""

    def __init__(self) -> None:
        self.objects: dict[str, list[Obj]] = {}
        self.streams: dict[str, asyncio.Queue[Obj]] = {}
        self.listed: list[tuple[str, dict[str, str]]] = []
        self.gate = asyncio.Event()  # lists wait for it: the test decides when the first list answers
        self.gate.set()

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        await self.gate.wait()
        self.listed.append((path, dict(params or {})))
        return {"metadata": {"resourceVersion": "1"}, "items": list(self.objects.get(path, []))}

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Obj]:
        queue = self.streams.setdefault(path, asyncio.Queue())
        while True:
            yield await queue.get()

    def push(self, path: str, kind: str, obj: Obj) -> None:
        self.streams.setdefault(path, asyncio.Queue()).put_nowait({"type": kind, "object": obj})

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "",
                      params: Mapping[str, str] | None = None) -> Any:
        raise NotImplementedError

    async def create(self, path: str, obj: Obj) -> Obj:
        raise NotImplementedError

    async def patch(self, path: str, patch: Any, content_type: str = "") -> Obj:
        raise NotImplementedError

    async def delete(self, path: str, options: Obj | None = None) -> Obj:
        raise NotImplementedError

    async def close(self) -> None:
        return None


CM_PATH = "/api/v1/namespaces/ns/configmaps"
SETTINGS = Ref("configmap", "ns", "settings")


def cm(name: str, rv: str, **data: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": data}


async def _settle(clock: FakeClock) -> None:
    await clock.advance(0)


async def test_one_watch_per_object_shared_by_pods_and_stopped_with_the_last() -> None:
    api, clock, changed = FakeApi(), FakeClock(), []
    watcher = ObjectWatcher(api, clock, changed.append)
    api.objects[CM_PATH] = [cm("settings", "1", a="1")]
    watcher.register("pod-1", {SETTINGS})
    watcher.register("pod-2", {SETTINGS})
    await watcher.wait_synced({SETTINGS})
    assert api.listed == [(CM_PATH, {"fieldSelector": "metadata.name=settings"})]
    assert watcher.get("configmap", "ns", "settings") == cm("settings", "1", a="1")
    assert watcher.users(SETTINGS) == {"pod-1", "pod-2"}
    watcher.unregister("pod-1")
    assert watcher.users(SETTINGS) == {"pod-2"}
    watcher.register("pod-2", set())  # the pod no longer references it
    assert watcher.users(SETTINGS) == set()
    with pytest.raises(ConfigError, match="failed to sync configmap cache"):
        watcher.get("configmap", "ns", "settings")
    await watcher.close()


async def test_missing_object_is_watched_and_its_creation_reported() -> None:
    api, clock, changed = FakeApi(), FakeClock(), []
    watcher = ObjectWatcher(api, clock, changed.append)
    watcher.register("pod-1", {SETTINGS})
    await watcher.wait_synced({SETTINGS})
    assert watcher.get("configmap", "ns", "settings") is None
    api.push(CM_PATH, "ADDED", cm("settings", "2", a="1"))
    await _settle(clock)
    assert changed == [SETTINGS] and watcher.get("configmap", "ns", "settings") == cm("settings", "2", a="1")
    api.push(CM_PATH, "MODIFIED", cm("settings", "3", a="2"))
    api.push(CM_PATH, "DELETED", cm("settings", "4", a="2"))
    await _settle(clock)
    assert changed == [SETTINGS] * 3 and watcher.get("configmap", "ns", "settings") is None
    await watcher.close()


async def test_reads_before_the_first_list_fail_after_a_second() -> None:
    api, clock = FakeApi(), FakeClock()
    api.gate.clear()  # the API does not answer the list
    watcher = ObjectWatcher(api, clock, lambda ref: None)
    watcher.register("pod-1", {SETTINGS})
    waiting = asyncio.ensure_future(watcher.wait_synced({SETTINGS}))
    await clock.advance(0)  # the wait starts (its deadline is one second from now)
    await clock.advance(0.5)
    assert not waiting.done()
    await clock.advance(0.5)
    assert waiting.done()
    with pytest.raises(ConfigError) as err:
        watcher.get("configmap", "ns", "settings")
    assert str(err.value) == "failed to sync configmap cache: timed out waiting for the condition"
    await watcher.close()


# The references a pod makes, by where they are made (podutil.VisitPodConfigmapNames / VisitPodSecretNames).
REFERENCES = [
    pytest.param({"containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {
        "name": "cm1", "key": "k"}}}, {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "k"}}}]}]},
                 {Ref("configmap", "ns", "cm1"), Ref("secret", "ns", "s1")}, id="env valueFrom"),
    pytest.param({"initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cm2"}},
                                                                {"secretRef": {"name": "s2"}}]}], "containers": []},
                 {Ref("configmap", "ns", "cm2"), Ref("secret", "ns", "s2")}, id="envFrom of an init container"),
    pytest.param({"containers": [], "volumes": [{"name": "a", "configMap": {"name": "cm3"}},
                                                {"name": "b", "secret": {"secretName": "s3"}},
                                                {"name": "c", "projected": {"sources": [
                                                    {"configMap": {"name": "cm4"}}, {"secret": {"name": "s4"}},
                                                    {"serviceAccountToken": {"path": "t"}}]}},
                                                {"name": "d", "emptyDir": {}}]},
                 {Ref("configmap", "ns", "cm3"), Ref("secret", "ns", "s3"), Ref("configmap", "ns", "cm4"),
                  Ref("secret", "ns", "s4")}, id="volumes and projected sources"),
    pytest.param({"containers": [{"name": "c", "env": [{"name": "A", "value": "x"}]}]}, set(), id="no references"),
]


@pytest.mark.parametrize("spec,want", REFERENCES)
def test_referenced_objects(spec: Obj, want: set[Ref]) -> None:
    assert referenced_objects({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}) == want


async def test_watch_stops_once_an_immutable_object_is_read() -> None:
    api, clock = FakeApi(), FakeClock()
    api.objects[CM_PATH] = [{**cm("settings", "1", a="1"), "immutable": True}]
    watcher = ObjectWatcher(api, clock, lambda ref: None)
    watcher.register("pod-1", {SETTINGS})
    await watcher.wait_synced({SETTINGS})
    assert watcher.get("configmap", "ns", "settings")["data"] == {"a": "1"}
    await _settle(clock)
    api.push(CM_PATH, "DELETED", cm("settings", "2"))  # no longer watched: the cached copy stays
    await _settle(clock)
    assert watcher.get("configmap", "ns", "settings")["data"] == {"a": "1"}
    watcher.unregister("pod-1")
    await watcher.close()
