"""A real cluster on this machine for a chaos run: one `kubelite server` (API server, scheduler and
controllers in one process) and three `kubelite agent` processes, each reaching the server only through
its own `LinkProxy`, plus the faults the schedule applies to them.

With `fencing`, the server's fencing controller fences every node it loses for `FENCE_DELAY` with the
`power` command (power.py: the agent and its node's workload SIGKILLed); a powered-off node stays off
until `power_on` at the end of the schedule restarts its agent and deletes its NodeFence."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kubelite.api.errors import ApiError
from kubelite.client.interface import Client
from kubelite.clock import Clock, RealClock
from kubelite.controllers.fencing import fences_path
from kubelite.testing.chaos import procs
from kubelite.testing.chaos.proxy import LinkProxy
from kubelite.testing.chaos.schedule import SERVER, Fault

log = logging.getLogger(__name__)

NODES = ["node-a", "node-b", "node-c"]
NODE_MONITOR_GRACE = 15.0  # as tests/e2e/test_node_failure.py: above the agents' 10 s Lease renewal
FENCE_DELAY = 5.0  # NotReady/Unknown this long before the fence: a partition of 20 s or more gets fenced


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubelite(*args: str, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "kubelite.cli.main", *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _signal(proc: subprocess.Popen[bytes] | None, sig: int) -> None:
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, sig)


@dataclass
class Cluster:
    workdir: Path
    run_id: str
    port: int = field(default_factory=_free_port)
    server: subprocess.Popen[bytes] | None = None
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    links: dict[str, LinkProxy] = field(default_factory=dict)
    clock: Clock = field(default_factory=RealClock)
    nodes: list[str] = field(default_factory=lambda: list(NODES))
    fencing: bool = False

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "server" / "kubeconfig"

    @property
    def shared(self) -> Path:
        """The directory every node mounts (outside each agent's protected data dir)."""
        return self.workdir / "shared"

    @property
    def fencing_config(self) -> Path:
        return self.workdir / "fencing.yaml"

    def powered_off(self, node: str) -> bool:
        return (self.workdir / f"{node}.off").exists()

    async def start(self) -> None:
        self.shared.mkdir(parents=True, exist_ok=True)
        if self.fencing:
            command = [sys.executable, "-m", "kubelite.testing.chaos.power", str(self.workdir), self.run_id, "{node}"]
            self.fencing_config.write_text(yaml.safe_dump({
                "apiVersion": "kubelite.io/v1alpha1", "kind": "FencingConfiguration", "delay": FENCE_DELAY,
                "maxConcurrent": 1, "retry": {"initial": 1, "max": 4},
                "pools": [{"name": "chaos", "nodeSelector": {}, "agents": [{"command": command, "timeout": 20}]}]}))
        await self.start_server()
        for node in self.nodes:
            link = LinkProxy(node, self.port, clock=self.clock)
            await link.start()
            self.links[node] = link
            config = yaml.safe_load(self.kubeconfig.read_text())
            for cluster in config["clusters"]:
                cluster["cluster"]["server"] = f"https://127.0.0.1:{link.port}"
            (self.workdir / f"{node}.kubeconfig").write_text(yaml.safe_dump(config))
            self.start_agent(node)

    async def start_server(self) -> None:
        self.server = _kubelite("server", "--data-dir", str(self.workdir / "server"), "--port", str(self.port),
                                "--node-monitor-grace-period", str(NODE_MONITOR_GRACE),
                                *(("--fencing-config", str(self.fencing_config)) if self.fencing else ()),
                                log_path=self.workdir / "server.log")
        for _ in range(600):
            if self.server.poll() is not None:
                raise RuntimeError(f"kubelite server exited; see {self.workdir / 'server.log'}")
            if self.kubeconfig.exists():
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                    writer.close()
                    return
                except OSError:
                    pass
            await self.clock.sleep(0.1)
        raise RuntimeError("kubelite server did not start in 60 s")

    def start_agent(self, node: str) -> None:
        (self.workdir / f"{node}.off").unlink(missing_ok=True)
        self.agents[node] = _kubelite("agent", "--kubeconfig", str(self.workdir / f"{node}.kubeconfig"),
                                      "--node-name", node, "--data-dir", str(self.workdir / node),
                                      "--proxy-mode", "none", log_path=self.workdir / f"{node}.log")
        (self.workdir / f"{node}.pid").write_text(str(self.agents[node].pid))  # for power.py

    async def power_on(self, client: Client) -> None:
        """Bring every powered-off node back: its agent restarted, then its NodeFence deleted (the
        administrator's word that it may run pods again; the controller then clears its condition)."""
        for node in self.nodes:
            if not self.powered_off(node):
                continue
            if self.agents[node].poll() is None:  # powered off mid-start: the agent is not the one it killed
                continue
            self.start_agent(node)
            try:
                await client.delete(fences_path(node))
            except ApiError as exc:
                if exc.code != 404:
                    raise

    async def inject(self, fault: Fault) -> None:
        """Apply `fault`, hold it for its duration, then end it (heal, SIGCONT or restart)."""
        log.info("fault (run time): %s", fault.describe())
        if fault.target == SERVER:
            await self._server_fault(fault)
        elif fault.kind in ("agent_kill", "agent_stop"):
            proc = self.agents[fault.target]
            _signal(proc, signal.SIGKILL if fault.kind == "agent_kill" else signal.SIGSTOP)
            await self.clock.sleep(fault.duration)
            if fault.kind == "agent_kill":
                proc.wait()
                if not self.powered_off(fault.target):  # a fenced node stays off until power_on
                    self.start_agent(fault.target)
            else:
                _signal(proc, signal.SIGCONT)
        else:
            self.links[fault.target].set(fault.kind, fault.delay)
            await self.clock.sleep(fault.duration)
            self.links[fault.target].set("ok")

    async def _server_fault(self, fault: Fault) -> None:
        if fault.kind == "store_stall":  # no store write (nor anything else) completes while it is stopped
            _signal(self.server, signal.SIGSTOP)
            await self.clock.sleep(fault.duration)
            _signal(self.server, signal.SIGCONT)
            return
        _signal(self.server, signal.SIGKILL)
        if self.server is not None:
            self.server.wait()
        await self.clock.sleep(fault.duration)
        await self.start_server()

    def heal(self) -> None:
        """End every fault at once (the schedule's own ends normally did already)."""
        for link in self.links.values():
            link.set("ok")
        for proc in [self.server, *self.agents.values()]:
            _signal(proc, signal.SIGCONT)

    async def stop(self) -> None:
        """Stop the agents and the server, then SIGKILL any workload process of this run still alive (an
        agent killed mid-run leaves its containers behind; they are this run's, nobody else's)."""
        self.heal()
        for proc in self.agents.values():
            _signal(proc, signal.SIGTERM)
        for proc in self.agents.values():
            await _wait(proc, 20, self.clock)
        _signal(self.server, signal.SIGTERM)
        if self.server is not None:
            await _wait(self.server, 20, self.clock)
        for link in self.links.values():
            await link.stop()
        for p in procs.scan(self.run_id, 0.0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)


async def _wait(proc: subprocess.Popen[bytes], timeout: float, clock: Clock) -> None:
    for _ in range(int(timeout * 10)):
        if proc.poll() is not None:
            return
        await clock.sleep(0.1)
    proc.kill()
    proc.wait()
