"""Pseudo-terminals for containers (`tty: true`) and for `kubectl exec -t`: one way to open, write and size them.

The child runs under util-linux `setsid --ctty`: a new session whose controlling terminal is its
stdin, the pty's slave. The child is no process group leader when it starts, so setsid does not
fork and the child's pid stays the session's (and the process group's: signals reach it whole).
Not preexec_fn: uvloop runs it before the child's descriptors are in place.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import termios

SETSID_CTTY = ("setsid", "--ctty")
WRITE_WAIT = 1.0  # seconds between checks of a full terminal (or pipe) while writing


def open_pty() -> tuple[int, int]:
    """(master, slave): the master non-blocking for the event loop's reader, the slave for the child."""
    master, slave = os.openpty()
    os.set_blocking(master, False)
    return master, slave


def write_all(fd: int, data: bytes) -> None:
    """Write everything, waiting while the terminal or pipe is full (call it in a thread, not the loop)."""
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            select.select([], [fd], [], WRITE_WAIT)


def resize(fd: int, width: int, height: int) -> None:
    """TIOCSWINSZ on the master: the child gets SIGWINCH and the new size."""
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
