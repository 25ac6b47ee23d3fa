"""pods/exec, pods/attach, pods/portforward: the API server's checks before it reaches any agent.

As upstream's ExecREST/AttachREST/PortForwardREST: the pod must exist, be scheduled and not be
finished, the container must be the pod's (or the only one), exec needs a command and every
streaming request at least one stream; a node whose agent publishes no endpoint is 503.
"""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from kubelite.testing.builders import make_pod
from tests.api.test_rest import PODS, call

Client = TestClient  # type: ignore[type-arg]

CASES = [
    # (name, method, path, status, message)
    ("exec_needs_a_command", "GET", "running/exec?stdout=true", 400, "you must specify at least 1 command"),
    ("exec_needs_a_stream", "GET", "running/exec?command=true", 400,
     "you must specify at least 1 of stdin, stdout, stderr"),
    ("attach_needs_a_stream", "GET", "running/attach", 400, "you must specify at least 1 of stdin, stdout, stderr"),
    ("unknown_container", "GET", "running/exec?command=true&stdout=true&container=nope", 400,
     "container nope is not valid for pod running"),
    ("unscheduled_pod", "GET", "pending/exec?command=true&stdout=true", 400,
     'container "main" in pod "pending" is waiting to start: ContainerCreating'),
    ("completed_pod", "GET", "done/exec?command=true&stdout=true", 400,
     "cannot exec into or attach to a container in a completed pod; current phase is Succeeded"),
    ("portforward_unscheduled_pod", "GET", "pending/portforward", 400,
     'pod "pending" is waiting to start: ContainerCreating'),
    ("node_without_an_agent", "GET", "running/exec?command=true&stdout=true", 503,
     'no node agent serves node "n1"'),
    ("portforward_node_without_an_agent", "POST", "running/portforward", 503, 'no node agent serves node "n1"'),
    ("missing_pod", "GET", "ghost/exec?command=true&stdout=true", 404, 'pods "ghost" not found'),
    ("wrong_method", "DELETE", "running/exec?command=true&stdout=true", 405, "pods/exec"),
]


@pytest.mark.parametrize(("method", "path", "status", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_streaming_checks(api: Client, method: str, path: str, status: int, message: str) -> None:
    await call(api, "POST", PODS, make_pod("running").node("n1").obj(), expect=201)
    await call(api, "POST", PODS, make_pod("pending").obj(), expect=201)
    await call(api, "POST", PODS, make_pod("done").node("n1").obj(), expect=201)
    await call(api, "PATCH", f"{PODS}/done/status", {"status": {"phase": "Succeeded"}},
               "application/merge-patch+json", expect=200)
    out = await call(api, method, f"{PODS}/{path}", expect=status)
    assert out["kind"] == "Status" and message in out["message"], out
