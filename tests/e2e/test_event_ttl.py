"""`kubelite server --event-ttl 2s`: an Event made with kubectl expires, and the official client's watch sees it
go as DELETED, as with kube-apiserver's lease-backed Events."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client, config, watch

from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.e2e

EVENT = """\
apiVersion: v1
kind: Event
metadata: {name: short-lived, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: p}
reason: Testing
message: gone in two seconds
type: Normal
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("server")
    proc = start_server(base / "data", base / "home", extra=["--disable", "scheduler,controllers",
                                                             "--event-ttl", "2s"])
    yield proc
    proc.stop()


def test_event_expires_and_watchers_see_it_deleted(server: ServerProcess) -> None:
    v1 = client.CoreV1Api(config.new_client_from_config(config_file=str(server.kubeconfig)))
    started = time.monotonic()
    server.kubectl("create", "-f", "-", stdin=EVENT)
    rv = v1.read_namespaced_event("short-lived", "default").metadata.resource_version
    seen = []
    watching = watch.Watch()
    for e in watching.stream(v1.list_namespaced_event, "default", resource_version=rv, timeout_seconds=15):
        seen.append((e["type"], e["object"].metadata.name))
        watching.stop()
    assert seen == [("DELETED", "short-lived")]
    assert time.monotonic() - started >= 2
    listed = server.kubectl("get", "events", "-n", "default", "-o", "name").stdout
    assert "short-lived" not in listed
