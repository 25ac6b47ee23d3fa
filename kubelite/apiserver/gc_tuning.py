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

After start-up a long-running process (`kubelite server`, `scheduler`, `controller-manager`: `start_serving`)
collects with SERVING_THRESHOLDS instead of CPython's (700, 10, 10). Measured with `benchmarks/gc_share.py`
(BENCHMARKS.md, "Garbage collection in the real processes"):

- **These processes make almost no cyclic garbage.** Their heaps are caches of decoded objects (trees of dicts
  and lists, freed by reference counting when a new copy replaces them): in SchedulingBasic (5,000 nodes,
  11,000 pods) all the server's collections freed ~3,200 objects, its 21 full collections 29.
- **Yet with the defaults collecting was a quarter to a third of their CPU**: 27-29 % of the server's and
  the scheduler's in SchedulingBasic, 33 % of the server's under `benchmarks/apiserver.py`, two thirds or more
  of it in full collections, with pauses up to ~1 s. While a cache fills, the 25 % rule (a full collection
  once the objects promoted since the last one reach a quarter of those it found) starts one every 25 % of
  growth, each walking the whole heap (five times the final heap in all). And a young collection walks every
  object made since the last one that is still alive, far more than the net count that triggers it (a
  decoded copy replacing an old one cancels the count, not the walk): at 700, what a request has in flight is
  found alive, promoted, and counted towards the 25 % rule although it dies soon after.
- **25,000** young: 36 times fewer young collections, each finding less in flight. **4**: a middle collection
  walks everything made over its young ones that is still alive (all of it while a cache fills), so its pause
  grows with young x middle threshold: ~0.2 s under that load, 0.25-0.64 s with (50,000, 10, 10).
  **50**: a full collection is considered once per 25,000 * 4 * 50 = 5 million net new objects (70,000 with
  the defaults) and the 25 % rule still decides: rare, and proportional to the heap's growth. The cost is
  that cyclic garbage promoted to the oldest generation waits that long — of which these processes make
  next to none.
- Result: GC 7-10 % of CPU instead of 27-34 %, no full collection while the caches filled, the longest pause
  ~0.1-0.3 s instead of ~1 s, the same peak RSS; SchedulingBasic 452 -> 601 pods/s, and 2.98 -> 2.14 ms of
  server CPU per pod create under `benchmarks/apiserver.py` (medians). Under steady churn
  (`benchmarks/churn.py`: the heap no longer grows, each update's copy replaces the last) collecting went from
  16 % of the server's CPU to 0.5 %: the net count hardly moves, so young collections all but stop; cyclic
  garbage would still count, and start one.
  The fuzz suite's `/readyz` probe is unchanged (max 5-15 ms either way: its server's heap stays small).
  The node agent keeps CPython's thresholds: its heap is small, and collecting was 4 % of its CPU with 100
  pods (`benchmarks/agent.py`), nearly all of it during start-up.
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
