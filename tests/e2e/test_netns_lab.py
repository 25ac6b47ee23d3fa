"""The network-namespace lab itself (kubelite/testing/netns.py), without kubelite: what a node's namespace
reaches, partitions, unique subnets for parallel labs, and cleanup (also of a crashed owner's leftovers).
Node-to-node traffic is not asserted: it crosses the host's bridge, where a host with br_netfilter and a
dropping FORWARD policy (Docker's) drops it; kubelite's tests need only host <-> node."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from kubelite.testing import netns
from tests.e2e import netns_nodes

OUTSIDE = "192.0.2.1"  # TEST-NET-1: an address off the lab
CONNECT = """\
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
    print("connected")
except ConnectionRefusedError:
    print("refused")  # reached the address: nothing listens there
except OSError as exc:
    print(type(exc).__name__, exc.errno)
"""


def connect(node: netns.Node | None, address: str, port: int = 9) -> str:
    """What a TCP connect to ADDRESS:PORT from `node`'s namespace (None: the host's) gives."""
    argv = [sys.executable, "-c", CONNECT, address, str(port)]
    out = subprocess.run(node.argv(argv) if node else argv, capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or out.stderr


@pytest.fixture
def lab() -> Iterator[netns.Lab]:
    with netns_nodes.lab() as made:
        yield made


def names(lab: netns.Lab) -> set[str]:
    """The lab's namespaces and host-side links that exist now."""
    spaces = {line.split()[0] for line in netns.ip("netns", "list").stdout.splitlines() if line.split()}
    links = set(netns.ip("-o", "link", "show").stdout.split())
    wanted = {n.netns for n in lab.nodes.values()} | {n.host_end for n in lab.nodes.values()} | {lab.bridge}
    return {n for n in wanted if n in spaces or f"{n}:" in links or any(w.startswith(f"{n}@") for w in links)}


REACH = [
    ("node reaches the host", "a", "host", "refused"),
    ("host reaches the node", None, "a", "refused"),
    ("node has no route off the lab", "a", "outside", "OSError 101"),  # ENETUNREACH
    ("node's loopback is up and its own", "a", "127.0.0.1", "refused"),
]


@pytest.mark.parametrize("name,source,target,expected", REACH, ids=[c[0] for c in REACH])
def test_reach(lab: netns.Lab, name: str, source: str | None, target: str, expected: str) -> None:
    a, b = lab.add_node("a"), lab.add_node("b")
    address = {"host": lab.host_address, "a": a.address, "b": b.address}.get(target, OUTSIDE if target == "outside"
                                                                              else target)
    assert connect({"a": a, "b": b}.get(source or ""), address) == expected


def test_partition_cuts_both_ways_until_healed(lab: netns.Lab) -> None:
    node = lab.add_node("a")
    node.partition()
    assert connect(node, lab.host_address) == "TimeoutError None"
    assert connect(None, node.address) == "TimeoutError None"
    node.heal()
    assert connect(node, lab.host_address) == "refused"


def test_labs_side_by_side_take_their_own_subnets(lab: netns.Lab) -> None:
    with netns.Lab() as other:
        assert other.subnet != lab.subnet and other.bridge != lab.bridge
        a, other_a = lab.add_node("a"), other.add_node("a")
        assert a.netns != other_a.netns and a.host_end != other_a.host_end


def test_close_removes_everything(lab: netns.Lab) -> None:
    lab.add_node("a")
    lab.add_node("b")
    before = names(lab)
    assert len(before) == 5
    nodes = dict(lab.nodes)
    lab.close()
    lab.nodes.update(nodes)  # to look for them again
    assert names(lab) == set()
    lab.close()  # idempotent


def test_a_crashed_owners_leftovers_are_removed() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)
    crashed = netns.Lab()
    crashed.add_node("a")
    crashed._lock.close()  # its process died: the flock is gone, the namespace and links are not
    with netns.Lab() as lab:
        assert lab.index == crashed.index  # the lowest free subnet again
        assert names(crashed) == {lab.bridge}  # its node is gone; the bridge is the new lab's, made afresh
        assert connect(lab.add_node("a"), lab.host_address) == "refused"
