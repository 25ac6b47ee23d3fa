"""Copying a container's output pipe into its CRI log file, so that an agent killed at any moment loses none.

The agent can be SIGKILLed at any time, and a restarted agent reopens the pipes and carries on
(L16). Output is lost only if it was taken out of the pipe but not yet written to the log, so
each read is followed by the write of everything it returned in the same callback, with no
await in between: bytes stay either in the pipe (for the next agent) or in the log file. (An
asyncio read transport would hold them in its buffer for a later task step, and holding back
a line's unterminated start until its newline comes would hold them in memory.) That is why a
read that ends inside a line writes that piece at once as a partial (P) entry, which the log
reader joins with the next one — the same entries kubelet's runtime writes for a long line, or
for an unterminated last line.

Entries are `<RFC3339Nano timestamp> <stream> <F|P> <line>`, kubelet's on-disk format.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from typing import IO

from kubelite.clock import Clock

MAX_LINE = 16 * 1024  # kubelet splits longer lines into partial (P) entries
READ_SIZE = 65536


TIMESTAMP_LEN = len("2006-01-02T15:04:05.000000000Z")  # every entry's stamp: fixed width, so text order is time order


def cri_timestamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def entries(stream: bytes, chunk: bytes, now: float) -> bytes:
    """The log entries for one read of `stream`: whole lines are F, pieces of a line are P."""
    prefix = cri_timestamp(now).encode() + b" " + stream + b" "
    out = []
    *lines, rest = chunk.split(b"\n")
    for line, full in [*((line, True) for line in lines), (rest, False)]:
        while len(line) > MAX_LINE or (line and not full):
            out.append(prefix + b"P " + line[:MAX_LINE] + b"\n")
            line = line[MAX_LINE:]
        if full:
            out.append(prefix + b"F " + line + b"\n")
    return b"".join(out)


def pump(fd: int, stream: bytes, log: IO[bytes], clock: Clock) -> asyncio.Future[None]:
    """Copy the non-blocking pipe `fd` into `log` (unbuffered) until every writer has closed it; the
    future is done then, and `fd` closed."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            log.write(entries(stream, chunk, clock.now()))  # one write(2) for the whole read
        elif not done.done():
            done.set_result(None)

    def closed(_: object) -> None:  # at the end of the output, or when cancelled
        loop.remove_reader(fd)
        os.close(fd)

    loop.add_reader(fd, readable)
    done.add_done_callback(closed)
    return done
