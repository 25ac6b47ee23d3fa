"""Keeping the agent's long-running loops alive: no error may end one, and no API call may hang one.

A loop that ended on a lost connection would leave the agent alive but inert (Lease frozen,
new pods never started), so each loop is restarted after any failure with a back-off; only
cancellation (agent shutdown) ends it. Calls to the API are bounded, so that a stalled server
(SIGSTOP, a hung connection) costs one attempt, not the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubelite.api.errors import unavailable
from kubelite.clock import Clock, bounded

log = logging.getLogger("kubelite.agent")

T = TypeVar("T")
REQUEST_TIMEOUT = 10.0
RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 10.0


async def timed(clock: Clock, request: Awaitable[T], seconds: float = REQUEST_TIMEOUT) -> T:
    """`request`'s result, or Unavailable (a transport failure, like any other) when the server has not
    answered within `seconds` — whatever the transport's own timeouts are. A coarse timeout (up to a second
    late): it almost never fires, and it is set for every call of every agent."""
    finished, result = await bounded(clock, request, seconds, coarse=True)
    if not finished:
        raise unavailable(f"the API server did not answer within {seconds:.0f} s")
    return result  # type: ignore[return-value]


async def forever(clock: Clock, name: str, loop: Callable[[], Awaitable[None]]) -> None:
    """Run `loop` until cancelled, restarting it (1 s doubling to 10 s) whenever it returns or fails."""
    delay = RESTART_DELAY
    while True:
        began = clock.monotonic()
        try:
            await loop()
            log.warning("%s ended; restarting it", name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s failed (%s: %s); restarting it in %.0f s", name, type(exc).__name__, exc, delay)
        if clock.monotonic() - began > MAX_RESTART_DELAY:  # it had been running well: start the back-off again
            delay = RESTART_DELAY
        await clock.sleep(delay)
        delay = min(MAX_RESTART_DELAY, delay * 2)
