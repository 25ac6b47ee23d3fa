"""Agents in their own network namespaces for the end-to-end tests (the Lab of kubelite/testing/netns.py).

The server listens on every address and advertises the lab's host address (`--bind-address 0.0.0.0
--advertise-address`), as a control plane for other machines would: its kubeconfig, the join command
and its serving certificate then name an address the nodes' namespaces can reach.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing import netns
from tests.conftest import ServerProcess


@contextlib.contextmanager
def lab() -> Iterator[netns.Lab]:
    """A Lab for a module fixture; skips the module where namespaces cannot be made."""
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"nodes in network namespaces: {reason}")
    with netns.Lab() as made:
        yield made


def server_flags(made: netns.Lab) -> list[str]:
    return ["--bind-address", "0.0.0.0", "--advertise-address", made.host_address]


def start_agent(node: netns.Node, server: ServerProcess, base: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`kubelite agent` for `node` inside its namespace, at its address; its log is BASE/NAME.log."""
    with (base / f"{node.name}.log").open("wb") as log:
        return node.popen([sys.executable, "-m", "kubelite.cli.main", "agent", "--kubeconfig", str(server.kubeconfig),
                           "--node-name", node.name, "--data-dir", str(base / node.name), "--address", node.address,
                           "--proxy-mode", "none", *extra], stdout=log, stderr=subprocess.STDOUT)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def internal_ip(server: ServerProcess, node: str) -> str:
    res = server.kubectl("get", "node", node, "-o", "json", check=False)
    addresses = json.loads(res.stdout)["status"].get("addresses") or [] if res.returncode == 0 else []
    return next((str(a["address"]) for a in addresses if a["type"] == "InternalIP"), "")
