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

# Memory once warm, per event delivered: the watch cache's ring (50,000 events) legitimately grows by one event
# (~5 KiB: the object and its encoded line) per write, ~100 bytes per delivery to 50 watchers; a leak that kept
# anything per delivery (a line, a queue entry) would cost 1 KiB or more each.
RSS_BYTES_PER_DELIVERY = 300


def test_no_acknowledged_write_is_lost_across_three_sigkills_under_20_writers(tmp_path: Path) -> None:
    result = kill_cycles(tmp_path, writers=20, kills=3, run_for=1.5)
    assert result.acknowledged > 100, "the load never got going"
    assert result.lost == 0, f"{result.lost} of {result.acknowledged} acknowledged writes lost"


def test_50_watchers_see_every_event_of_20_writers_in_order_without_memory_growth(tmp_path: Path) -> None:
    result = fan_out(tmp_path, watchers=50, writers=20, patches=20, rounds=4)
    assert result.lost == 0, f"{result.lost} events lost of {result.events} per watcher"
    deliveries = result.watchers * result.events * 3 // 4  # the three measured rounds
    assert (result.rss_end_mib - result.rss_warm_mib) * 2**20 / deliveries < RSS_BYTES_PER_DELIVERY, result
