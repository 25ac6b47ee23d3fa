"""The slice tracker (k8s.io/endpointslice/util endpointslice_tracker_test.go TestEndpointSliceTrackerStaleSlices,
by resourceVersion where upstream compares generations)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelite.controllers.endpointslice import SliceTracker

Obj = dict[str, Any]
SVC = ("ns1", "svc1")


def es(name: str, rv: int) -> Obj:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}}


@pytest.mark.parametrize(("name", "wrote", "deleted", "cached", "stale"), [
    ("empty tracker", [], [], {"a": es("a", 1)}, False),
    ("empty slices: our created slice not seen yet", [es("a", 2)], [], {}, True),
    ("matching resource version", [es("a", 2)], [], {"a": es("a", 2)}, False),
    ("slice with newer resource version than tracked", [es("a", 2)], [], {"a": es("a", 3)}, False),
    ("slice with older resource version than tracked", [es("a", 3)], [], {"a": es("a", 2)}, True),
    ("expected deletion, still cached", [], ["a"], {"a": es("a", 2)}, True),
    ("expected deletion, gone", [], ["a"], {}, False),
    ("one of two slices behind", [es("a", 2), es("b", 5)], [], {"a": es("a", 2), "b": es("b", 4)}, True),
])
def test_stale_slices(name: str, wrote: list[Obj], deleted: list[str], cached: dict[str, Obj], stale: bool) -> None:
    tracker = SliceTracker()
    for obj in wrote:
        tracker.wrote(SVC, obj)
    for n in deleted:
        tracker.deleted(SVC, n)
    assert tracker.stale(SVC, cached) is stale
    assert tracker.stale(("ns1", "other"), cached) is False


def test_caught_up_expectations_are_dropped_and_deletions_by_others_end_the_wait() -> None:
    tracker = SliceTracker()
    tracker.wrote(SVC, es("a", 2))
    assert tracker.stale(SVC, {"a": es("a", 2)}) is False
    assert SVC not in tracker.expected
    tracker.wrote(SVC, es("b", 7))
    tracker.gone(SVC, "b")  # someone else deleted it before the informer saw our write
    assert tracker.stale(SVC, {}) is False
