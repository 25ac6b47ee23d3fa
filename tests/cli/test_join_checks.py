"""`kubelite join`'s checks before it asks for a certificate, and its discovery retry lines.

Node names: kubeadm's TestValidateNodeRegistrationOptions cases (cmd/kubeadm/app/apis/kubeadm/validation),
messages as upstream's field errors. The Ready check: runKubeletStartJoinPhase (cmd/kubeadm/app/cmd/phases/join/
kubelet.go) refuses a Node of the name whose Ready condition is True, and nothing else. The retry lines: kubeadm's
getClusterInfo logs "[discovery] … will try again" while cluster-info lacks the token's signature."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kubelite.api.errors import ApiError
from kubelite.api.validation import DNS1123_SUBDOMAIN_MSG
from kubelite.cli.join import (
    POLL,
    RETRY_LOG_INTERVAL,
    JoinError,
    get_cluster_info,
    refuse_ready_node,
    validate_node_name,
)
from kubelite.clock import FakeClock

Obj = dict[str, Any]

NAMES = [
    ("node name can't be empty", "", "nodeRegistration: Required value: --node-name or .nodeRegistration.name"),
    ("upper cases is invalid", "INVALID-NODENAME",
     f'nodeRegistration.name: Invalid value: "INVALID-NODENAME": {DNS1123_SUBDOMAIN_MSG}'),
    ("can't have trailing dashes", "invalid-nodename-",
     f'nodeRegistration.name: Invalid value: "invalid-nodename-": {DNS1123_SUBDOMAIN_MSG}'),
    ("unsupported characters", "invalid-node?name",
     f'nodeRegistration.name: Invalid value: "invalid-node?name": {DNS1123_SUBDOMAIN_MSG}'),
    ("underscore (QA's Node_4)", "Node_4", f'nodeRegistration.name: Invalid value: "Node_4": {DNS1123_SUBDOMAIN_MSG}'),
    ("too long and invalid: both errors, aggregated", "A" * 254,
     f'[nodeRegistration.name: Invalid value: "{"A" * 254}": must be no more than 253 characters, '),
    ("valid node name", "valid-nodename", None),
    ("valid subdomain", "worker-1.example.com", None),
]


@pytest.mark.parametrize("case,name,message", NAMES, ids=[c[0] for c in NAMES])
def test_validate_node_name(case: str, name: str, message: str | None) -> None:
    if message is None:
        validate_node_name(name)
        return
    with pytest.raises(JoinError) as err:
        validate_node_name(name)
    assert str(err.value).startswith(message)


class Nodes:
    """GET /api/v1/nodes/NAME answered from `nodes`; `error` instead when set."""

    def __init__(self, nodes: dict[str, Obj], error: ApiError | None = None) -> None:
        self.nodes, self.error = nodes, error

    async def get(self, path: str) -> Obj:
        if self.error is not None:
            raise self.error
        name = path.rsplit("/", 1)[1]
        if name not in self.nodes:
            raise ApiError(404, "NotFound", f'nodes "{name}" not found')
        return self.nodes[name]


def node(*conditions: tuple[str, str]) -> Obj:
    return {"metadata": {"name": "node1"}, "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


READY_MSG = ('a Node with name "node1" and status "Ready" already exists in the cluster. You must delete the '
             "existing Node or change the name of this new joining Node")
EXISTING = [
    ("no such node: join", Nodes({}), None),
    ("ready node: refused", Nodes({"node1": node(("MemoryPressure", "False"), ("Ready", "True"))}), READY_MSG),
    ("not ready node: join (taken over)", Nodes({"node1": node(("Ready", "False"))}), None),
    ("unknown node (partitioned or gone): join", Nodes({"node1": node(("Ready", "Unknown"))}), None),
    ("node without status: join", Nodes({"node1": {"metadata": {"name": "node1"}}}), None),
    ("other node ready: join", Nodes({"node2": node(("Ready", "True"))}), None),
    ("cannot read nodes: refused", Nodes({}, ApiError(403, "Forbidden", 'nodes "node1" is forbidden')),
     'cannot get Node "node1": '),
]


@pytest.mark.parametrize("case,nodes,message", EXISTING, ids=[c[0] for c in EXISTING])
async def test_refuse_ready_node(case: str, nodes: Nodes, message: str | None) -> None:
    if message is None:
        await refuse_ready_node(nodes, "node1")
        return
    with pytest.raises(JoinError) as err:
        await refuse_ready_node(nodes, "node1")
    assert str(err.value).startswith(message)


async def test_discovery_says_it_waits_for_a_signature(caplog: pytest.LogCaptureFixture) -> None:
    """An unknown token: cluster-info never carries its signature. Each reason is said when it first appears and
    then every RETRY_LOG_INTERVAL, not at every POLL; the timeout's error is the last reason."""
    answers: list[Obj | ApiError] = [ApiError(503, "ServiceUnavailable", "starting")]

    async def fetch(ca_pem: bytes | None) -> Obj:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, ApiError):
            raise answer
        return answer

    answers.append({"data": {"kubeconfig": "x"}})
    clock = FakeClock()
    caplog.set_level(logging.INFO, logger="kubelite.join")
    task = asyncio.create_task(get_cluster_info(fetch, None, "abcdef", clock, timeout=12.0))
    while not task.done():
        await clock.advance(POLL)
        await asyncio.sleep(0)
    with pytest.raises(JoinError, match="could not find a JWS signature in the cluster-info ConfigMap for token ID "
                                        "'abcdef'"):
        await task
    lines = [r.getMessage() for r in caplog.records]
    waiting = ("[discovery] The cluster-info ConfigMap does not yet contain a JWS signature for token ID \"abcdef\", "
               "will try again")
    assert lines[0] == "[discovery] Failed to request cluster-info: starting, will try again"
    # the signature is missing from t=0.5 to the timeout at 12: said at 0.5, 5.5, 10.5
    assert lines[1:] == [waiting] * (1 + int((12.0 - POLL) // RETRY_LOG_INTERVAL))


JOIN = ["join", "--server", "https://10.0.0.1:6443", "--token", "abcdef.0123456789abcdef", "--ca-cert-hash", "sha256:x"]


@pytest.mark.parametrize(("flags", "want"), [
    pytest.param([], ("--proxy-mode", "nftables", "--port", "10250"),
                 id="the agent listens on kubelet's port 10250, so a firewall can name it"),
    pytest.param(["--port", "0", "--proxy-mode", "none", "--node-config", "n.yaml"],
                 ("--proxy-mode", "none", "--port", "0", "--node-config", "n.yaml"),
                 id="--port 0 (several nodes on one machine), the proxy mode and the node config are handed on"),
])
def test_join_hands_its_agent_flags_on(flags: list[str], want: tuple[str, ...]) -> None:
    from kubelite.cli.main import join_agent_args, parser

    assert join_agent_args(parser().parse_args([*JOIN, *flags])) == want


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_port_out_of_range_is_refused_as_the_command_line_is_read(port: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from kubelite.cli.main import parser

    with pytest.raises(SystemExit):
        parser().parse_args([*JOIN, "--port", port])
    assert f"argument --port: invalid port_number value: '{port}'" in capsys.readouterr().err
