"""S7: the API server explains force deletion to every client with a `Warning` header, as kubectl does for its users."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]
KUBECTL_WORDING = ("Immediate deletion does not wait for confirmation that the running resource has been terminated. "
                   "The resource may continue to run on the cluster indefinitely.")


@pytest.mark.parametrize(("node", "phase", "query", "warned"), [
    pytest.param("n1", "Running", "?gracePeriodSeconds=0", True, id="running pod on a node, grace 0: warned"),
    pytest.param("n1", "Pending", "?gracePeriodSeconds=0", True, id="pod bound but not started, grace 0: warned"),
    pytest.param("n1", "Running", "", False, id="graceful delete: not warned"),
    pytest.param("", "Pending", "?gracePeriodSeconds=0", False, id="unscheduled pod: nothing runs, not warned"),
    pytest.param("n1", "Failed", "?gracePeriodSeconds=0", False,
                 id="terminal pod (the agent's own delete after confirming termination): not warned"),
])
async def test_force_delete_of_bound_pod_is_warned(api: Client, node: str, phase: str, query: str,
                                                   warned: bool) -> None:
    pod = make_pod("web").obj()
    if node:
        pod["spec"]["nodeName"] = node
    await call(api, "POST", PODS, pod, expect=201)
    await call(api, "PATCH", f"{PODS}/web/status", {"status": {"phase": phase}}, "application/merge-patch+json",
               expect=200)
    resp = await api.request("DELETE", f"{PODS}/web{query}")
    assert resp.status == 200
    expected = [f'299 - "pod default/web on node n1 was deleted immediately: {KUBECTL_WORDING}"'] if warned else []
    assert resp.headers.getall("Warning", []) == expected
