"""Fence agents (S4): the ways the fencing controller can make sure a node runs nothing any more.

Each agent is one awaitable `fence(target) -> Outcome`; `Outcome.fenced` True means the agent
*confirmed* the node is cut off (powered off, firewalled, its agent killed). Anything else —
a non-zero exit, a timeout, a non-2xx answer, an exception — is a failed attempt, never a fence:
the controller retries with back-off and never treats the node as fenced meanwhile.

- `CommandAgent`: runs an argv with `{node}` and `{address}` substituted; exit 0 = fenced.
- `WebhookAgent`: POSTs `{"node": …, "address": …, "fence": …}` as JSON; a 2xx answer = fenced.
- `PythonAgent`: calls `module:function(target)` (sync or async); a true result = fenced.
- `SelfFenceAgent` (`self`): the node's agent advertises `kubelite.io/self-fence-after: D` and kills
  every container once it could not renew its Lease for D seconds (kubelite/agent/self_fence.py);
  this agent confirms the fence once the controller itself has seen no Lease renewal for
  D + margin seconds of its own monotonic clock. The README's Fencing section states the assumption.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kubelite.clock import Clock, bounded

Obj = dict[str, Any]
SELF_FENCE_ANNOTATION = "kubelite.io/self-fence-after"


@dataclass(frozen=True)
class Target:
    node: str
    address: str
    fence: str  # the NodeFence's name
    node_object: Obj


@dataclass(frozen=True)
class Outcome:
    fenced: bool
    message: str


class FenceAgent(Protocol):
    name: str

    async def fence(self, target: Target) -> Outcome: ...


def node_address(node: Obj) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    return next((a.get("address", "") for a in addresses if a.get("type") == "InternalIP"), "")


@dataclass
class CommandAgent:
    argv: list[str]
    clock: Clock
    timeout: float = 60.0
    name: str = "command"

    async def fence(self, target: Target) -> Outcome:
        argv = [a.replace("{node}", target.node).replace("{address}", target.address) for a in self.argv]
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return Outcome(False, f"{argv[0]}: {exc}")
        finished, result = await bounded(self.clock, proc.communicate(), self.timeout)
        if not finished or result is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the whole group
            await proc.wait()
            return Outcome(False, f"{argv[0]} timed out after {self.timeout:g} s")
        tail = result[0].decode(errors="replace").strip()[-200:]
        if proc.returncode == 0:
            return Outcome(True, f"{argv[0]} exited 0{': ' + tail if tail else ''}")
        return Outcome(False, f"{argv[0]} exited {proc.returncode}{': ' + tail if tail else ''}")


@dataclass
class WebhookAgent:
    url: str
    timeout: float = 30.0
    name: str = "webhook"

    async def fence(self, target: Target) -> Outcome:
        body = {"node": target.node, "address": target.address, "fence": target.fence}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session, \
                    session.post(self.url, json=body) as resp:
                text = (await resp.text())[:200]
                return Outcome(200 <= resp.status < 300, f"{self.url} answered {resp.status}: {text}".strip())
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Outcome(False, f"{self.url}: {type(exc).__name__}: {exc}")


@dataclass
class PythonAgent:
    entry_point: str  # module:function
    name: str = "python"

    def __post_init__(self) -> None:
        module, _, attr = self.entry_point.partition(":")
        self.function: Callable[[Target], Any] = getattr(importlib.import_module(module), attr)

    async def fence(self, target: Target) -> Outcome:
        try:
            result = self.function(target)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # a broken fence device is a failed attempt, never a fence
            return Outcome(False, f"{self.entry_point} raised {type(exc).__name__}: {exc}")
        return Outcome(bool(result), f"{self.entry_point} returned {result!r}")


class SelfFenceAgent:
    """Confirms a node's self-fence: no Lease renewal seen for D + margin of the controller's monotonic time."""

    name = "self"

    def __init__(self, clock: Clock, margin: float, last_renewal_seen: Callable[[str], float | None]) -> None:
        self.clock = clock
        self.margin = margin
        self.last_renewal_seen = last_renewal_seen  # node -> monotonic time the controller last saw its Lease move

    def deadline(self, target: Target) -> float | None:
        after = self_fence_after(target.node_object)
        seen = self.last_renewal_seen(target.node)
        if after is None or seen is None:
            return None
        return seen + after + self.margin

    async def fence(self, target: Target) -> Outcome:
        due = self.deadline(target)
        if due is None:
            if self_fence_after(target.node_object) is None:
                return Outcome(False, f"node does not advertise {SELF_FENCE_ANNOTATION}")
            return Outcome(False, "no Lease of the node seen yet: the self-fence is counted from the first one seen")
        wait = due - self.clock.monotonic()
        if wait > 0:
            await self.clock.sleep(wait)
        if self.deadline(target) != due:  # renewed meanwhile: the node is alive and has not fenced itself
            return Outcome(False, "the node renewed its Lease while the self-fence was awaited")
        return Outcome(True, f"no Lease renewal seen for {self_fence_after(target.node_object):g} s "
                             f"+ {self.margin:g} s margin: the node's agent has killed its containers")


def self_fence_after(node: Obj) -> float | None:
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(SELF_FENCE_ANNOTATION)
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None
