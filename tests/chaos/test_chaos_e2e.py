"""The CI variant of `make chaos`: five short seeded schedules against a real control plane and three real
agents, every invariant checked. `make chaos` runs 50 schedules of 60 s.

half_open is left out here: the agent does not yet detect a half-open connection and stays blind for
~150 s (tests/chaos/test_known_bugs.py pins it); put it back when that test passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.testing.chaos.run import run_one

pytestmark = pytest.mark.e2e

SEEDS = range(1, 6)
DURATION = 12.0
EXCLUDE = frozenset({"half_open"})


@pytest.mark.timeout(600)
async def test_short_seeded_schedules_keep_every_invariant(tmp_path: Path) -> None:
    reports = [await run_one(seed, DURATION, tmp_path / f"seed-{seed}", EXCLUDE) for seed in SEEDS]
    text = "\n".join(r.text() for r in reports)
    assert sum(len(r.faults) for r in reports) >= len(SEEDS), text
    assert all(r.ok for r in reports), text  # no violation, recovered, and evidence of every kind observed
