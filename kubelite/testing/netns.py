"""Nodes with their own network addresses on one machine, for tests: each node agent in a network namespace.

Several agents on one machine otherwise share 127.0.0.1: one address for every Node, one set of host
ports, no way to cut one node off. A `Lab` is a private LAN instead, built from the kernel's own
parts: a bridge in the host namespace that holds the control plane's address (`.1` of a /24 taken from
198.18.0.0/15, the range RFC 2544 sets aside for network tests, which is never routed), and per node a
network namespace whose `eth0` is one end of a veth pair, the other end a port of that bridge. A node's
namespace has only its /24's connected route and `lo`: no default route, so its traffic reaches the
host and the other nodes and nothing else (node-to-node frames cross the bridge, so a host that loads
br_netfilter with a dropping FORWARD policy, as Docker does, drops them: the tests rely on host <-> node
only). `partition()` sets the node's host-side veth end down (both directions cut, like a pulled
cable), `heal()` sets it up again.

Commands run inside a namespace with `nsenter --net=…`, which switches the network namespace only:
`ip netns exec` also remounts /sys, which hides the cgroup hierarchy an agent needs.

Names are unique per /24: a Lab holds an flock on `/run/kubelite-netns/N.lock` for subnet N
while it lives, so parallel test processes take different subnets; the bridge is `klbN`, the veth host
ends `klNvI`, the namespaces `kubelite-labN-I`. Whoever next takes subnet N first removes what a
crashed owner left under those names. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2 and
nsenter: `unavailable()` says why not, for a test to skip.
"""

from __future__ import annotations

import fcntl
import functools
import ipaddress
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

RANGE = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544: for network tests, not routed
SUBNETS = tuple(RANGE.subnets(new_prefix=24))
LOCKS = Path("/run/kubelite-netns")  # beside iproute2's /run/netns: one place per machine, whatever TMPDIR says
COMMAND_TIMEOUT = 30.0
UP_POLL = 0.01


class Unavailable(Exception):
    """Network namespaces cannot be made here (not root, no iproute2, a kernel without them)."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `ip ARGS`; a failure (with `check`) raises with ip's own message."""
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if check and res.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


@functools.cache
def unavailable() -> str | None:
    """Why network namespaces with veth pairs cannot be made here, or None when they can (probed once)."""
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command (iproute2 / util-linux)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    probe, a, b = f"kubelite-probe-{os.getpid()}", f"klp{os.getpid()}a", f"klp{os.getpid()}b"
    try:
        ip("netns", "add", probe)
        ip("link", "add", a, "type", "veth", "peer", "name", b)
        ip("link", "set", b, "netns", probe)
        ip("link", "add", f"klp{os.getpid()}br", "type", "bridge")
    except OSError as exc:
        return f"cannot make a network namespace with a veth pair and a bridge: {exc}"
    finally:
        ip("link", "del", f"klp{os.getpid()}br", check=False)
        ip("link", "del", a, check=False)
        ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class Node:
    """One node's network namespace: its address on the lab's LAN and the host end of its cable."""

    name: str
    netns: str
    address: str
    host_end: str

    def argv(self, command: Sequence[str]) -> list[str]:
        """`command` run inside the namespace (nsenter execs it: the process's pid is the command's)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *command]

    def popen(self, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start `command` inside the namespace (Popen's keyword arguments pass through)."""
        return subprocess.Popen(self.argv(command), **kwargs)

    def partition(self) -> None:
        """Cut the node off the LAN (host and other nodes), both ways, until `heal()`."""
        ip("link", "set", self.host_end, "down")

    def heal(self) -> None:
        """Plug the node back in; returns once both ends are up and ready to carry traffic at once."""
        ip("link", "set", self.host_end, "up")
        # Neighbour (ARP) entries that failed while cut would hold the first packets back about a second
        # more: forget them on both sides, as the next packet then asks afresh.
        ip("-n", self.netns, "neigh", "flush", "dev", "eth0")
        ip("neigh", "flush", "to", self.address)
        for _ in range(int(COMMAND_TIMEOUT / UP_POLL)):
            if _is_up(self.host_end) and _is_up("eth0", self.netns):
                return
            time.sleep(UP_POLL)
        raise OSError(f"{self.host_end} of node {self.name} did not come up")


class Lab:
    """A private LAN on this machine: the host at `host_address`, nodes added by `add_node` (see module doc).

    Use as a context manager: leaving it removes the namespaces, veth pairs and bridge, on failure too.
    Processes a test started inside a node must be stopped by the test first (a namespace with a process
    still in it lives on, unnamed, until that process exits).
    """

    def __init__(self) -> None:
        reason = unavailable()
        if reason is not None:
            raise Unavailable(reason)
        self.nodes: dict[str, Node] = {}
        self._lock, self.index = _take_subnet()
        self.subnet = SUBNETS[self.index]
        self.bridge = f"klb{self.index}"
        self.host_address = str(self.subnet.network_address + 1)
        try:
            _remove_leftovers(self.index)
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.host_address}/{self.subnet.prefixlen}", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise

    def add_node(self, name: str) -> Node:
        """A new namespace `name` on the LAN, with the next free address; `lo` and `eth0` up."""
        if name in self.nodes:
            raise ValueError(f"the lab already has a node {name}")
        i = len(self.nodes)
        address = self.subnet.network_address + 2 + i
        if address >= self.subnet.broadcast_address:
            raise ValueError(f"a lab holds at most {self.subnet.num_addresses - 3} nodes")
        node = Node(name, f"kubelite-lab{self.index}-{i}", str(address), f"kl{self.index}v{i}")
        self.nodes[name] = node
        peer = f"kl{self.index}p{i}"
        ip("netns", "add", node.netns)
        ip("link", "add", node.host_end, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", node.netns)
        ip("link", "set", node.host_end, "master", self.bridge, "up")
        inside = ("-n", node.netns)
        ip(*inside, "link", "set", peer, "name", "eth0")
        ip(*inside, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip(*inside, "link", "set", "eth0", "up")
        ip(*inside, "link", "set", "lo", "up")
        return node

    def close(self) -> None:
        """Remove every namespace, veth pair and the bridge, and give the subnet back (idempotent)."""
        if self._lock.closed:
            return
        _remove_leftovers(self.index)
        self.nodes.clear()
        self._lock.close()  # releases the flock

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _is_up(link: str, namespace: str | None = None) -> bool:
    where = ("-n", namespace) if namespace else ()
    shown = json.loads(ip(*where, "-j", "link", "show", "dev", link).stdout or "[]")
    return bool(shown) and shown[0].get("operstate") == "UP"


def _take_subnet() -> tuple[IO[str], int]:
    """An flock'ed lock file for the first /24 no other Lab holds and no interface here uses."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    in_use = _host_networks()
    for index, subnet in enumerate(SUBNETS):
        if any(subnet.overlaps(net) for net in in_use):
            continue
        lock = (LOCKS / f"{index}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return lock, index
    raise Unavailable(f"every /24 of {RANGE} is taken")


def _host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of this namespace's interfaces except our own bridges (a crashed Lab's is reused)."""
    links = json.loads(ip("-j", "-4", "addr", "show").stdout or "[]")
    return [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}").network
            for link in links if not str(link.get("ifname", "")).startswith("klb")
            for a in link.get("addr_info") or []]


def _remove_leftovers(index: int) -> None:
    """Delete subnet `index`'s namespaces, veth pairs and bridge (ours at close, a crashed owner's at start)."""
    for line in ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"kubelite-lab{index}-"):
            ip("netns", "del", name, check=False)
    for link in json.loads(ip("-j", "link", "show").stdout or "[]"):
        name = str(link.get("ifname", ""))
        if name.startswith(f"kl{index}v") or name == f"klb{index}":
            ip("link", "del", name, check=False)
