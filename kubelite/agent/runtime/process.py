"""The process runtime: a container is a process group in its own session, logging in CRI format.

Each container runs under a one-line shell shim that leads its process group. The shim defers
every catchable signal (a trapped signal waits for the foreground command), so a stop signal sent
to the group reaches the container while the shim stays to record the container's exit status
in a file; the container itself starts with default dispositions. stdout and stderr are named
pipes that the shim and the container hold open read-write: the container never gets SIGPIPE
while the agent is down, and a restarted agent simply reopens them. With the shim's pid and its
kernel start time (which tells a live process from a reused pid) recorded in the pod's
checkpoint, this is what lets a restarted agent re-adopt running containers and learn how the
ones that ended meanwhile exited — the role containerd's shims play for kubelet.

Log lines are written as `<RFC3339Nano timestamp> <stream> <F|P> <line>`, kubelet's on-disk
format, so `pods/log` can serve timestamps, tails and `--since` (cri_log.py copies the pipes into it).
Exits are observed through a pidfd, the same way for the agent's own children and for re-adopted processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kubelite.agent.cgroups import Cgroups, Limits
from kubelite.agent.runtime import cri_log, terminal
from kubelite.agent.runtime.interface import KILLED, Exit, Handle
from kubelite.agent.umask import CONTAINER_UMASK
from kubelite.clock import Clock

STREAMS = ((".out", b"stdout"), (".err", b"stderr"))  # the named pipes beside the log, and their streams
_UNTRAPPED = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGCONT}
_DEFERRED = " ".join(str(int(s)) for s in sorted(signal.valid_signals()) if s < 32 and s not in _UNTRAPPED)
# $1 exit file, $2 cgroup.procs files to join (space-separated, may be empty), then the container's argv.
# The shim's own stderr goes to /dev/null (fd 3 keeps the container's): the shell reports a job that a
# signal ended ("Terminated") on its stderr, which must not end up in the container's log. The
# container's stderr is set in the forked child `( exec … )`, as dash applies a simple command's
# redirections in the parent while it waits. The container gets a runtime's usual umask 022 back (the
# agent's own 077 keeps its logs and checkpoints private).
# A container starts with every signal's default disposition, as runc gives it: a signal the agent ignores (SIGINT
# and SIGQUIT, for an agent started as a background job of a non-interactive shell) would otherwise be inherited
# as ignored through exec — and a shell cannot trap or reset a signal ignored on entry — so a container asked to
# stop with SIGINT (its STOPSIGNAL) would not. coreutils' env resets them before the shim's shell starts.
DEFAULT_SIGNALS = ("/usr/bin/env", "--default-signal")
# A stop signal can reach the group after the shim set its traps and before the container's subshell has reset them
# (before the fork, or in the child's first microseconds): the shim defers it, the child drops it, and the container
# would run on until SIGKILL (a pod deleted as it starts). dash runs a pending trap only between commands and the
# shim waits on the container meanwhile, so the shim cannot pass it on; instead the subshell marks, as its first
# command (dispositions back to the defaults), that from now on a signal reaches it (`.run` beside the exit file), and
# `ProcessRuntime.signal` sends again, once, a signal that found no mark when the mark appears.
STARTED_MARK = ".run"
SHIM = (f'exec 3>&2 2>/dev/null; x=$1 g=$2; shift 2; for f in $g; do echo $$ >"$f"; done; trap : {_DEFERRED}; '
        f'(: >"${{x%.exit}}{STARTED_MARK}"; umask {CONTAINER_UMASK:03o}; exec "$@" 2>&3 3>&-); c=$?; echo $c >"$x"; '
        'exit $c')
RESEND_POLL = 0.005  # seconds between looks for the mark of a container signalled as it started
RESEND_WITHIN = 2.0  # how long to look: the mark comes within milliseconds of the start


@dataclass
class _Stdio:
    """A new container's standard streams: the child's ends, and this agent's (readers for the log pumps, the
    stdin pipe's writer, the terminal's master)."""

    child: tuple[int, int, int]
    readers: list[tuple[int, bytes]]
    stdin: int | None = None
    terminal: int | None = None

    @classmethod
    def pipes(cls, state: Path, stdin: bool) -> _Stdio:
        fifos = [state.with_suffix(suffix) for suffix, _ in STREAMS]
        for fifo in fifos:
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
        writers = [os.open(f, os.O_RDWR | os.O_CLOEXEC) for f in fifos]  # a writer exists before any reader
        readers = [os.open(f, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC) for f in fifos]
        ours, theirs = (os.pipe2(os.O_CLOEXEC)[::-1]) if stdin else (None, os.open(os.devnull, os.O_RDONLY))
        return cls((theirs, writers[0], writers[1]), list(zip(readers, (n for _, n in STREAMS), strict=True)),
                   stdin=ours)

    @classmethod
    def pty(cls) -> _Stdio:
        master, slave = terminal.open_pty()
        return cls((slave, slave, slave), [(master, STREAMS[0][1])], terminal=master)

    def close_child(self) -> None:
        for fd in set(self.child):
            os.close(fd)

    def close_all(self) -> None:
        for fd, _ in self.readers:
            os.close(fd)
        if self.stdin is not None:
            os.close(self.stdin)


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None when no such process runs."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()
    if fields[0] == b"Z":  # a zombie has ended; only its parent's wait is pending
        return None
    return int(fields[19])


def process_environment(pid: int) -> dict[str, str]:
    """The environment `pid` was started with (/proc/PID/environ): a re-adopted shim's is its container's, as
    containerd keeps each container's spec. Empty when it cannot be read (the process has just ended)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (os.fsdecode(item).partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


@dataclass
class Process(Handle):
    ticks: int = 0  # the shim's kernel start time: (pid, ticks) names this process even after pid reuse
    state: Path = Path()  # <log path without .log>: .exit, .out and .err live beside the log
    cgroup: str = ""
    child: subprocess.Popen[bytes] | None = None  # None for a re-adopted process (not our child)
    readers: list[asyncio.Future[None]] = field(default_factory=list)
    # This agent's end of the container's stdin (a pipe) or of its terminal (a pty's master; the log pump
    # reads it too). Neither survives an agent restart: partial, see README (containerd's shim keeps them).
    stdin_fd: int | None = None
    terminal: int | None = None

    @property
    def log_path(self) -> Path:
        return self.state.with_suffix(".log")

    @property
    def has_stdin(self) -> bool:
        return self.alive and (self.stdin_fd is not None or self._terminal() is not None)

    def _terminal(self) -> int | None:
        """The master while its log pump has it open (the pump closes it when the terminal hangs up)."""
        return self.terminal if self.terminal is not None and self.readers and not self.readers[0].done() else None

    def finish(self, result: Exit) -> None:
        super().finish(result)
        if self.stdin_fd is not None:
            self.close_stdin()

    async def write_stdin(self, data: bytes) -> None:
        fd = self._terminal() if self.terminal is not None else self.stdin_fd
        if fd is not None and data:
            with contextlib.suppress(OSError):  # the container is gone, or closed its stdin
                await asyncio.to_thread(terminal.write_all, fd, data)

    def close_stdin(self) -> None:
        """EOF on the stdin pipe; a terminal stays (it hangs up only when the container ends)."""
        if self.stdin_fd is not None:
            os.close(self.stdin_fd)
            self.stdin_fd = None

    def resize(self, width: int, height: int) -> None:
        fd = self._terminal()
        if fd is not None:
            terminal.resize(fd, width, height)

    def checkpoint(self) -> dict[str, Any]:
        return {**super().checkpoint(), "ticks": self.ticks, "state": str(self.state), "cgroup": self.cgroup}


class ProcessRuntime:
    sandboxed = True  # containers are host processes: pod sync wraps them in bubblewrap

    def __init__(self, clock: Clock, cgroups: Cgroups | None = None) -> None:
        self.clock = clock
        self.cgroups = cgroups
        self._resends: set[asyncio.Task[None]] = set()  # `signal`'s second sends, held until done

    async def start(self, argv: list[str], env: dict[str, str], cwd: str | None, log_path: Path,
                    limits: Limits | None = None, stdin: bool = False, tty: bool = False) -> Process:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        state = log_path.with_suffix("")
        for stale in (".exit", STARTED_MARK):
            state.with_suffix(stale).unlink(missing_ok=True)
        cgroup, procs = "", []
        if self.cgroups is not None and limits is not None:
            cgroup = f"{limits.group}/{state.parent.name}_{state.name}"
            procs = self.cgroups.create(cgroup, limits)
        io = _Stdio.pty() if tty else _Stdio.pipes(state, stdin)
        shim = [*DEFAULT_SIGNALS, "/bin/sh", "-c", SHIM, "kubelite-shim", str(state.with_suffix(".exit")),
                " ".join(procs), *argv]
        try:
            child = subprocess.Popen([*terminal.SETSID_CTTY, *shim] if tty else shim, env=env, cwd=cwd or None,
                                     stdin=io.child[0], stdout=io.child[1], stderr=io.child[2],
                                     start_new_session=not tty)
        except OSError:
            io.close_all()
            raise
        finally:
            io.close_child()
        p = Process(child.pid, self.clock.now(), ticks=start_time(child.pid) or 0, state=state, cgroup=cgroup,
                    child=child, stdin_fd=io.stdin, terminal=io.terminal)
        p.env = env
        self._attach(p, io.readers)
        return p

    def adopt(self, checkpoint: dict[str, Any]) -> Process:
        """The process a previous agent started, live or ended (then with its recorded exit)."""
        p = Process(int(checkpoint["pid"]), float(checkpoint["started"]), ticks=int(checkpoint["ticks"]),
                    state=Path(checkpoint["state"]), cgroup=str(checkpoint.get("cgroup", "")))
        if not self._same(p):
            p.finish(self._recorded_exit(p))
            return p
        p.env = process_environment(p.pid)
        readers = []
        for suffix, name in STREAMS:
            fifo = p.state.with_suffix(suffix)
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(os.stat(fifo).st_mode):
                    readers.append((os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), name))
        self._attach(p, readers)
        return p

    def find(self, log_path: Path) -> Process | None:
        """The process started for `log_path` by an agent that died before recording its pid, if it ran.

        The shim's command line names its exit file, which identifies it; a shim that has
        ended left that file behind.
        """
        state = log_path.with_suffix("")
        marker = str(state.with_suffix(".exit")).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if len(argv) > 4 and argv[3] == b"kubelite-shim" and argv[4] == marker:
                    pid = int(entry.name)
                    return self.adopt({"pid": pid, "ticks": start_time(pid) or 0, "started": self.clock.now(),
                                       "state": str(state), "cgroup": ""})
        if state.with_suffix(".exit").exists():
            p = Process(0, self.clock.now(), state=state)
            p.finish(self._recorded_exit(p))
            return p
        return None

    def _same(self, p: Process) -> bool:
        return p.ticks != 0 and start_time(p.pid) == p.ticks

    def _attach(self, p: Process, readers: list[tuple[int, bytes]]) -> None:
        """Pump the output pipes into the log and watch for the exit through a pidfd."""
        log: IO[bytes] = p.log_path.open("ab", buffering=0)
        p.readers = [cri_log.pump(fd, name, log, self.clock) for fd, name in readers]
        asyncio.gather(*p.readers).add_done_callback(lambda _: log.close())
        try:
            pidfd = os.pidfd_open(p.pid)
        except ProcessLookupError:
            p.finish(self._reap(p))
            return
        if p.child is None and not self._same(p):  # the pid was reused between the check and the pidfd
            os.close(pidfd)
            p.finish(self._recorded_exit(p))
            return
        loop = asyncio.get_running_loop()

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            p.finish(self._reap(p))

        loop.add_reader(pidfd, exited)

    def _reap(self, p: Process) -> Exit:
        if p.child is not None:
            code = p.child.wait()
            exit = Exit(128 - code if code < 0 else code)
        else:
            exit = self._recorded_exit(p)
        if self.cgroups is not None and p.cgroup:
            oom = self.cgroups.oom_killed(p.cgroup)
            self.cgroups.remove(p.cgroup)
            if oom and exit.code == KILLED.code:
                exit = Exit(exit.code, oom_killed=True)
        return exit

    @staticmethod
    def _recorded_exit(p: Process) -> Exit:
        """The container's exit status as the shim recorded it, and when (the record's mtime: the real
        finishedAt of a container that ended while no agent watched); no record: it was SIGKILLed."""
        record = p.state.with_suffix(".exit")
        try:
            return Exit(int(record.read_text()), finished_at=record.stat().st_mtime)
        except (OSError, ValueError):
            return KILLED

    def signal(self, p: Handle, sig: int) -> None:
        if not p.alive:
            return
        # Looked for before sending: a mark made after the signal came may have come after the child dropped it.
        unmarked = (p if isinstance(p, Process) and sig not in _UNTRAPPED
                    and not p.state.with_suffix(STARTED_MARK).exists() else None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, sig)
        if unmarked is not None:
            task = asyncio.get_running_loop().create_task(self._resend_once_marked(unmarked, sig))
            self._resends.add(task)
            task.add_done_callback(self._resends.discard)

    async def _resend_once_marked(self, p: Process, sig: int) -> None:
        """Send `sig` again when the container's subshell marks that signals reach it (see STARTED_MARK): the first
        may have been dropped. Not when the process ended meanwhile — it got the first (or never started)."""
        mark = p.state.with_suffix(STARTED_MARK)
        # (A container adopted from an agent older than the mark never gets one: each signal then costs this loop its
        # RESEND_WITHIN of looks, and sends nothing again.)
        for _ in range(round(RESEND_WITHIN / RESEND_POLL)):
            await self.clock.sleep(RESEND_POLL)
            if not p.alive:
                return
            if mark.exists():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
                return

    def kill(self, p: Handle) -> None:
        self.signal(p, signal.SIGKILL)

    async def wait(self, p: Handle) -> Exit:
        """The exit of the container's main process (log readers finish when the pipes close)."""
        await p.exited()
        assert p.result is not None
        return p.result
