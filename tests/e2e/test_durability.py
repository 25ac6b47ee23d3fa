"""Durability under SIGKILL and watch fan-out under load, with real server processes (issue 10).

The workloads are `benchmarks/durability.py`'s (which prints the figures for BENCHMARKS.md); here they run
small enough for the suite (well under 30 s each) and assert: no acknowledged write lost across repeated
SIGKILLs under 20 writers, no watch event lost or reordered for 50 watchers under 20 writers, and no
growth of the server's memory once warm with the object count constant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.durability import fan_out, kill_cycles

pytestmark = pytest.mark.e2e

# The server's RSS grows by the watch cache's ring (one event per write, up to 50,000 events) whoever watches; the
# same writes watched by 50 instead of 1 must cost no more than this: a leak that kept even 150 bytes per
# delivery (a line, a queue entry) would cost 8 MiB over the 49 x 1,200 extra deliveries of the measured rounds.
FAN_OUT_GROWTH_MIB = 8


def test_no_acknowledged_write_is_lost_across_three_sigkills_under_20_writers(tmp_path: Path) -> None:
    result = kill_cycles(tmp_path, writers=20, kills=3, run_for=1.5)
    assert result.acknowledged > 100, "the load never got going"
    assert result.lost == 0, f"{result.lost} of {result.acknowledged} acknowledged writes lost"


def test_50_watchers_see_every_event_of_20_writers_in_order_without_memory_growth(tmp_path: Path) -> None:
    one = fan_out(tmp_path / "one", watchers=1, writers=20, patches=20, rounds=4)
    many = fan_out(tmp_path / "many", watchers=50, writers=20, patches=20, rounds=4)
    assert (one.lost, many.lost) == (0, 0), f"events lost of {many.events} per watcher"
    growth = (many.rss_end_mib - many.rss_warm_mib) - (one.rss_end_mib - one.rss_warm_mib)
    assert growth < FAN_OUT_GROWTH_MIB, (one, many)
