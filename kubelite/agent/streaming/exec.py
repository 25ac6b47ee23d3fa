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
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from aiohttp import web

from kubelite.agent.runtime import terminal
from kubelite.agent.streaming import channels
from kubelite.agent.streaming.transport import Channels, Refused, Streams, open_channels
from kubelite.agent.umask import CONTAINER_UMASK
from kubelite.api.errors import ApiError
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent.exec")

READ_SIZE = 32 * 1024
DRAIN_AFTER_EXIT = 2.0  # output still buffered when the command ended (a background child may hold the tty)


class Command:
    """A command for exec: on a pseudo-terminal or on pipes, in its own session (killed as a whole)."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None) -> None:
        self.proc = proc
        self.master = master

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str], cwd: str | None, streams: Streams) -> Command:
        if streams.tty:
            master, slave = terminal.open_pty()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *terminal.SETSID_CTTY, *argv, env=env, cwd=cwd or None, stdin=slave, stdout=slave, stderr=slave,
                    umask=CONTAINER_UMASK)  # the container's (an exec joins its process), not the agent's 077
            except (OSError, subprocess.SubprocessError):
                os.close(master)
                raise
            finally:
                os.close(slave)
            return cls(proc, master)
        pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=cwd or None, stdin=pipe if streams.stdin else null,
            stdout=pipe if streams.stdout else null, stderr=pipe if streams.stderr else null, start_new_session=True,
            umask=CONTAINER_UMASK)
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
            await asyncio.to_thread(terminal.write_all, self.master, data)
        elif self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    def close_stdin(self) -> None:
        if self.master is None and self.proc.stdin is not None:
            self.proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self.master is not None:
            terminal.resize(self.master, width, height)

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
        except BlockingIOError:
            return
        except OSError:  # EIO: every slave descriptor is closed
            chunk = b""
        if not chunk:
            loop.remove_reader(fd)
        queue.put_nowait(chunk)

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


async def relay(conn: Channels, session: Session, clock: Clock) -> int | None:
    """Carry the streams over `conn` until the session ends; its exit code, None when the client left first."""
    pumps = [asyncio.ensure_future(_pump(conn, channel, out)) for channel, out in session.outputs().items()]
    reader = asyncio.ensure_future(_client_input(conn, session))
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


async def _pump(conn: Channels, channel: int, out: AsyncIterator[bytes]) -> None:
    with contextlib.suppress(ConnectionError):
        async for chunk in out:
            await conn.send(channel, chunk)


async def _client_input(conn: Channels, session: Session) -> None:
    """stdin, resize and close-of-stdin from the client, until it closes the connection."""
    async for channel, payload in conn.incoming():
        if channel == channels.STDIN:
            await session.write(payload)
        elif channel == channels.RESIZE:
            size = channels.resize(payload)
            if size is not None:
                session.resize(*size)
        elif channel == channels.CLOSE and payload[:1] == bytes([channels.STDIN]):
            session.close_stdin()


async def finish(conn: Channels, status: bytes | None) -> None:
    """The error channel's last word (none for a client that left), then the close."""
    if status is not None:
        with contextlib.suppress(ConnectionError):
            await conn.send(channels.ERROR, status)
    await conn.close()


async def serve(request: web.Request, streams: Streams, start: Callable[[], Awaitable[Session]],
                clock: Clock) -> web.StreamResponse:
    """Upgrade, start the session (a command for exec, the container for attach), carry its streams; how it
    ended goes on the error channel."""
    try:
        resp, conn = await open_channels(request, streams, clock)
    except Refused as exc:
        err = ApiError(exc.status, "Forbidden" if exc.status == 403 else "BadRequest", str(exc))
        return web.json_response(err.status(), status=err.code)
    try:
        session = await start()
    except (OSError, subprocess.SubprocessError) as exc:
        await finish(conn, channels.failure(str(exc)))
        return resp
    code = await relay(conn, session, clock)
    await finish(conn, None if code is None else channels.exit_status(code))
    return resp
