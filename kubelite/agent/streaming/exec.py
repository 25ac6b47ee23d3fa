"""exec: a command run in a running container, its streams carried over the WebSocket channel protocol.

The command runs as the container's own command does (pod_containers.command): the container's
environment and working dir, inside a bubblewrap sandbox built from the same pod and container
spec — the same binds, masks, capabilities and user. A fresh sandbox rather than entering the
container's mount namespace (nsenter on its pid): here no other namespace is unshared and the
container's root is the host's `/` bound in, so the two views of the files are the same (only a
mount the container made itself, which needs a privileged container, would differ), while a
fresh sandbox takes its restrictions from the one function that defines them, so an exec'd
process can never hold more privileges than its container.

With `tty` the command gets a pseudo-terminal as its controlling terminal (resize through
TIOCSWINSZ; stderr is merged, as upstream), otherwise pipes. The exit code goes back on the error
channel; a client that goes away kills the command's session.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import struct
import subprocess
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from aiohttp import WSMsgType, web

from kubelite.agent.streaming import channels
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent.exec")

READ_SIZE = 32 * 1024
# A new session whose controlling terminal is stdin, the pty's slave (util-linux setsid; the child is no
# process group leader, so setsid(1) does not fork and its pid stays the session's). Not preexec_fn: uvloop
# runs it before the child's descriptors are in place.
SETSID_CTTY = ("setsid", "--ctty", "--wait")
DRAIN_AFTER_EXIT = 2.0  # output still buffered when the command ended (a background child may hold the tty)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "t")


@dataclass(frozen=True)
class Streams:
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def of(cls, request: web.Request) -> Streams:
        tty = _flag(request, "tty")
        return cls(_flag(request, "stdin"), _flag(request, "stdout"), _flag(request, "stderr") and not tty, tty)


class Command:
    """A command for exec: on a pseudo-terminal or on pipes, in its own session (killed as a whole)."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None) -> None:
        self.proc = proc
        self.master = master

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str], cwd: str | None, streams: Streams) -> Command:
        if streams.tty:
            master, slave = os.openpty()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *SETSID_CTTY, *argv, env=env, cwd=cwd or None, stdin=slave, stdout=slave, stderr=slave)
            except (OSError, subprocess.SubprocessError):
                os.close(master)
                raise
            finally:
                os.close(slave)
            return cls(proc, master)
        pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=cwd or None, stdin=pipe if streams.stdin else null,
            stdout=pipe if streams.stdout else null, stderr=pipe if streams.stderr else null, start_new_session=True)
        return cls(proc, None)

    def outputs(self) -> dict[int, AsyncIterator[bytes]]:
        if self.master is not None:
            return {channels.STDOUT: _read_fd(self.master)}
        out: dict[int, AsyncIterator[bytes]] = {}
        for channel, stream in ((channels.STDOUT, self.proc.stdout), (channels.STDERR, self.proc.stderr)):
            if stream is not None:
                out[channel] = _read_stream(stream)
        return out

    async def write(self, data: bytes) -> None:
        if self.master is not None:
            await asyncio.to_thread(_write_all, self.master, data)
        elif self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    def close_stdin(self) -> None:
        if self.master is None and self.proc.stdin is not None:
            self.proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self.master is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    async def wait(self) -> int:
        code = await self.proc.wait()
        return 128 - code if code < 0 else code

    def end(self) -> None:
        """A command outlives neither its client nor its connection: its whole session is killed."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


async def _read_stream(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await stream.read(READ_SIZE):
        yield chunk


async def _read_fd(fd: int) -> AsyncIterator[bytes]:
    """A pty master's output until the slave side is closed by everyone (EIO)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            chunk = os.read(fd, READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(fd)
        queue.put_nowait(chunk)

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        while chunk := await queue.get():
            yield chunk
    finally:
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(fd)


class Session(Protocol):
    """What `relay` carries: a command run for exec, or a running container for attach."""

    def outputs(self) -> dict[int, AsyncIterator[bytes]]: ...

    async def write(self, data: bytes) -> None: ...

    def close_stdin(self) -> None: ...

    def resize(self, width: int, height: int) -> None: ...

    async def wait(self) -> int: ...

    def end(self) -> None:
        """The connection is over (the client left, or the command or container ended)."""
        ...


async def relay(ws: web.WebSocketResponse, session: Session, clock: Clock) -> int | None:
    """Carry the streams over `ws` until the session ends; its exit code, None when the client left first."""
    pumps = [asyncio.ensure_future(_pump(ws, channel, out)) for channel, out in session.outputs().items()]
    reader = asyncio.ensure_future(_client_input(ws, session))
    waiter = asyncio.ensure_future(session.wait())
    try:
        await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            return None
        if pumps:
            await bounded(clock, asyncio.wait(pumps), DRAIN_AFTER_EXIT)
        return waiter.result()
    finally:
        for task in (*pumps, reader, waiter):
            task.cancel()
        session.end()


async def _pump(ws: web.WebSocketResponse, channel: int, out: AsyncIterator[bytes]) -> None:
    with contextlib.suppress(ConnectionError):
        async for chunk in out:
            await ws.send_bytes(channels.frame(channel, chunk))


async def _client_input(ws: web.WebSocketResponse, command: Session) -> None:
    """stdin, resize and (v5) close messages from the client, until it closes the connection."""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY or not msg.data:
            continue
        channel, payload = msg.data[0], msg.data[1:]
        if channel == channels.STDIN:
            await command.write(payload)
        elif channel == channels.RESIZE:
            size = channels.resize(payload)
            if size is not None:
                command.resize(*size)
        elif channel == channels.CLOSE and payload[:1] == bytes([channels.STDIN]):
            command.close_stdin()


async def upgrade(request: web.Request, streams: Streams) -> web.WebSocketResponse:
    """Switch to the channel protocol; kubelet's first message, an empty frame on the lowest writable
    channel, tells the client the streams are set up."""
    ws = web.WebSocketResponse(protocols=channels.PROTOCOLS, max_msg_size=0)
    await ws.prepare(request)
    first = channels.STDOUT if streams.stdout else channels.STDERR if streams.stderr else channels.ERROR
    await ws.send_bytes(channels.frame(first, b""))
    return ws


async def finish(ws: web.WebSocketResponse, status: bytes | None) -> web.WebSocketResponse:
    """The error channel's last word (none for a client that left), then the close."""
    if status is not None:
        with contextlib.suppress(ConnectionError):
            await ws.send_bytes(channels.frame(channels.ERROR, status))
    await ws.close()
    return ws


async def serve(request: web.Request, argv: list[str], env: dict[str, str], cwd: str | None,
                clock: Clock) -> web.StreamResponse:
    """Run the command over the channel protocol; how it ended goes on the error channel."""
    streams = Streams.of(request)
    ws = await upgrade(request, streams)
    try:
        command = await Command.start(argv, env, cwd, streams)
    except (OSError, subprocess.SubprocessError) as exc:
        return await finish(ws, channels.failure(str(exc)))
    code = await relay(ws, command, clock)
    return await finish(ws, None if code is None else channels.exit_status(code))
