"""The cyclic garbage collector, tuned for a long-running server.

CPython's full (generation 2) collections stop every thread of the process for as long as they take to walk
every tracked container object. In the fuzz campaign of 2026-11-24 the `/readyz` probe waited up to 11.9 s
behind such collections (RELIABILITY.md, "Fuzz suite"): there, mostly of the fuzzer's memory, the server
being a thread of the test process; but the server's own heap makes them too. Measured on this machine:
the API server holds ~105,000 tracked objects once started (modules, OpenAPI schemas,
pydantic models), 60 ms of CPU per full collection before any object is stored, several times that in wall
time under load; they never become garbage. `after_start_up` moves them out of the collector's reach with
`gc.freeze()` (the permanent generation: never walked, never collected; reference counting still frees
them). The watch cache keeps its ring as bytes for the same reason (`cache.Recorded`).

Thresholds are left at CPython's defaults: after the freeze a full collection walks only what the server
made since, and the 25 % rule (a full collection only when the objects surviving since the last one are a
quarter of those it found) already keeps full collections proportional to the heap's growth.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

SERVING_THRESHOLDS = (25_000, 4, 50)  # why: the module's docstring


def after_start_up() -> None:
    """Freeze what start-up allocated, once the server has loaded its schemas and its cache.

    The collection first frees start-up's cyclic garbage (frozen garbage would never be freed)."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """A long-running process's collector, from the end of its start-up until the block ends: start-up's objects
    frozen (`after_start_up`) and SERVING_THRESHOLDS (the process's own thresholds back on the way out)."""
    after_start_up()
    previous = gc.get_threshold()
    gc.set_threshold(*SERVING_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection while a block builds many objects that all stay alive (decoding a watch's backlog).

    Each collection triggered meanwhile would walk everything built so far, to free nothing: decoding 30,000
    pod events took 18-29 s with the collector on and 1.8 s with it paused (on this machine, loaded)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
