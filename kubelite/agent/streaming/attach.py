"""attach: a running container's stdin, stdout and stderr over the WebSocket channel protocol.

Output is the container's log followed from the moment of attaching (as upstream, what came
before is not replayed: kubectl says "If you don't see a command prompt, try pressing enter");
the log is where the runtime copies every byte the container writes, so any number of clients
can attach at once. Input goes to the stdin the runtime gave a container with `stdin: true` (a
pipe, or its terminal with `tty: true`; resize sets the terminal's size). With `stdinOnce` the
container's stdin is closed when the first attach session ends. The session ends when the
container does (a Success status, as kubelet; `kubectl run` reads the exit code from the pod).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

from kubelite.agent.logs import _format as entry_text
from kubelite.agent.runtime.interface import Handle
from kubelite.agent.streaming import channels
from kubelite.agent.streaming.transport import Streams
from kubelite.clock import Clock

FOLLOW_POLL = 0.05


async def follow(path: Path, stream: bytes, alive: Callable[[], bool], clock: Clock) -> AsyncIterator[bytes]:
    """The bytes `stream` adds to the CRI log at `path` from now on, until the container has ended."""
    with path.open("rb") as log:
        log.seek(0, 2)
        pending = b""
        while True:
            chunk = log.read()
            if not chunk:
                if not alive():
                    return
                await clock.sleep(FOLLOW_POLL)
                continue
            *entries, pending = (pending + chunk).split(b"\n")
            out = b"".join(entry_text(e + b"\n", False) for e in entries if e.split(b" ", 2)[1:2] == [stream])
            if out:
                yield out


class Attached:
    """exec.relay's view of a running container: its log from now on, its stdin; ending only detaches."""

    def __init__(self, handle: Handle, log_path: Path, streams: Streams, stdin_once: bool, clock: Clock) -> None:
        self.handle, self.log_path, self.streams, self.stdin_once, self.clock = (handle, log_path, streams,
                                                                                 stdin_once, clock)

    def outputs(self) -> dict[int, AsyncIterator[bytes]]:
        def alive() -> bool:
            return self.handle.alive

        out: dict[int, AsyncIterator[bytes]] = {}
        if self.streams.stdout:
            out[channels.STDOUT] = follow(self.log_path, b"stdout", alive, self.clock)
        if self.streams.stderr:
            out[channels.STDERR] = follow(self.log_path, b"stderr", alive, self.clock)
        return out

    async def write(self, data: bytes) -> None:
        if self.streams.stdin:
            await self.handle.write_stdin(data)

    def close_stdin(self) -> None:
        """The client's stdin ended: with stdinOnce the container's does too (without, it stays open for the
        next attach, as containerd's)."""
        self.end()

    def resize(self, width: int, height: int) -> None:
        self.handle.resize(width, height)

    async def wait(self) -> int:
        await self.handle.exited()
        return 0

    def end(self) -> None:
        if self.stdin_once and self.streams.stdin:
            self.handle.close_stdin()
