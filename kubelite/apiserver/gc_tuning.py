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

After start-up a long-running process (`kubelite server`, `scheduler`, `controller-manager`: `start_serving`) collects
with SERVING_THRESHOLDS instead of CPython's (700, 10, 10); measured with `benchmarks/gc_share.py`
(BENCHMARKS.md, "Garbage collection in the real processes"):

- **These processes make almost no cyclic garbage.** Their heaps are caches of decoded objects (trees of dicts
  and lists, freed by reference counting when a new copy replaces them); in SchedulingBasic (5,000 nodes,
  11,000 pods) the server's collections freed ~3,000 objects in all, its 20 full collections 29.
- **Collecting was a quarter of their CPU anyway** with the defaults: 25-29 % of the server's and of the
  scheduler's in SchedulingBasic, three quarters of it in full collections, with pauses up to 0.9 s (server)
  and 1.2 s (scheduler). A young collection walks every object made since the last one that is still alive,
  far more than the net count that triggers it (a decoded copy replacing an old one cancels the count, not
  the walk); what one finds alive — a request's objects in flight — is promoted, and counts towards the 25 %
  rule (a full collection once the objects promoted since the last one are a quarter of those it found)
  although most of it dies soon after. While a cache fills, the rule still starts a full collection every
  25 % of growth, each walking the whole cache (5 times the final heap in all).
- **25,000** young: 36 times fewer young collections, each finding less of what is in flight; **4**: a
  middle collection walks everything made over its last five young ones that is still alive (all of it while a
  cache fills), so it is kept short — its longest pause under that load ~170-210 ms, 250-480 ms with 10;
  **50**: a full collection is considered once per 25,000 * 4 * 50 = 5 million net new objects (70,000 with
  the defaults), and the 25 % rule still decides whether it happens: full collections stay proportional to
  the heap's growth, and rare. SchedulingBasic: GC 5-7 % of CPU, no full collection while the caches filled,
  longest pause ~0.2 s, same peak RSS.
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


def start_serving() -> None:
    """A long-running process's collector from the end of its start-up to its exit: start-up's objects frozen
    (`after_start_up`) and SERVING_THRESHOLDS.

    For the rest of the process's life: CPython's thresholds put back at shutdown would start a full collection
    of the whole heap on the way out (the API server benchmark: 1.1-1.2 s of CPU before exiting)."""
    after_start_up()
    gc.set_threshold(*SERVING_THRESHOLDS)


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
