"""The node's addresses and nodeInfo as kubelet (with cAdvisor's machine info) reports them: GOARCH, os-release's
PRETTY_NAME, the host's boot and machine IDs, and the node's name as its Hostname address (kubelet with
--hostname-override: several agents share this host)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from kubelite.agent.node import BOOT_ID, NodeReporter, go_arch, os_image
from kubelite.clock import FakeClock


@pytest.mark.parametrize("machine,arch", [
    pytest.param("x86_64", "amd64", id="x86_64 is amd64"),
    pytest.param("aarch64", "arm64", id="aarch64 is arm64"),
    pytest.param("armv7l", "arm", id="armv7l is arm"),
    pytest.param("riscv64", "riscv64", id="an unknown machine is itself"),
])
def test_go_arch(machine: str, arch: str) -> None:
    assert go_arch(machine) == arch


@pytest.mark.parametrize("content,image", [
    pytest.param('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
                 "Debian GNU/Linux 12 (bookworm)", id="PRETTY_NAME, unquoted"),
    pytest.param("PRETTY_NAME='Alpine Linux v3.20'\n", "Alpine Linux v3.20", id="single quotes"),
    pytest.param("NAME=Foo\n", "Linux", id="no PRETTY_NAME is Linux"),
    pytest.param(None, "Linux", id="no os-release is Linux"),
])
def test_os_image(tmp_path: Path, content: str | None, image: str) -> None:
    path = tmp_path / "os-release"
    if content is not None:
        path.write_text(content)
    assert os_image(path) == image


def test_node_info_and_addresses() -> None:
    clock = FakeClock()
    node = NodeReporter(None, clock, "node-7", "10.0.0.7", {"pods": "110"}, lambda: 0)  # type: ignore[arg-type]
    obj = node.node_object()
    info = obj["status"]["nodeInfo"]
    assert info["architecture"] == obj["metadata"]["labels"]["kubernetes.io/arch"] == go_arch(platform.machine())
    assert info["osImage"] == os_image()
    assert info["bootID"] == (BOOT_ID.read_text().strip() if BOOT_ID.exists() else "")
    assert obj["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.7"},
                                          {"type": "Hostname", "address": "node-7"}]
