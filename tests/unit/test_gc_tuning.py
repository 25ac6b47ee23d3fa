"""`gc_tuning.serving`: what a long-running process's collector is set to after start-up, and undone after.

No timings here: what the thresholds buy is measured in BENCHMARKS.md ("Garbage collection in the real
processes")."""

from __future__ import annotations

import contextlib
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
    gc.set_threshold(*OWN)
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_serving_sets_the_serving_thresholds() -> None:
    with gc_tuning.serving():
        assert gc.get_threshold() == gc_tuning.SERVING_THRESHOLDS
    assert gc_tuning.SERVING_THRESHOLDS != OWN


@pytest.mark.parametrize("fails", [False, True], ids=["on-exit", "on-error"])
def test_serving_gives_the_process_its_own_thresholds_back(fails: bool) -> None:
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext(), gc_tuning.serving():
        if fails:
            raise RuntimeError("the server failed")
    assert gc.get_threshold() == OWN


def test_serving_freezes_what_start_up_made_and_tracks_what_comes_after() -> None:
    start_up = [Node()]
    with gc_tuning.serving():
        later = [Node()]
        tracked = {id(o) for o in gc.get_objects()}
        assert id(start_up) not in tracked and id(start_up[0]) not in tracked  # frozen: no collection walks them
        assert id(later) in tracked
        assert gc.get_freeze_count() > 0


def test_serving_still_frees_cycles_made_after_start_up() -> None:
    with gc_tuning.serving():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
