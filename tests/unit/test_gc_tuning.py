"""`gc_tuning.start_serving`: what a long-running process's collector is set to once it has started.

No timings here: what the thresholds buy is measured in BENCHMARKS.md ("Garbage collection in the real
processes"). Nothing to restore either: a process keeps them until it exits (the function's docstring says why);
the fixture gives this test process its own collector back."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kubelite.apiserver import gc_tuning

OWN = (1_234, 5, 6)  # a process's own thresholds, unlike both CPython's defaults and SERVING_THRESHOLDS


class Node:
    """A container that can hold a reference cycle and be weakly referenced."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def own_collector() -> Iterator[None]:
    """Each test starts from OWN thresholds and nothing frozen, and leaves the test process as it found it."""
    before = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*OWN)
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_serving_sets_the_serving_thresholds() -> None:
    gc_tuning.start_serving()
    assert gc.get_threshold() == gc_tuning.SERVING_THRESHOLDS != OWN


def test_serving_freezes_what_start_up_made_and_tracks_what_comes_after() -> None:
    start_up = [Node()]
    gc_tuning.start_serving()
    later = [Node()]
    tracked = {id(o) for o in gc.get_objects()}
    assert id(start_up) not in tracked and id(start_up[0]) not in tracked  # frozen: no collection walks them
    assert id(later) in tracked and id(later[0]) in tracked
    assert gc.get_freeze_count() > 0


def test_serving_still_frees_cycles_made_after_start_up() -> None:
    gc_tuning.start_serving()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None
