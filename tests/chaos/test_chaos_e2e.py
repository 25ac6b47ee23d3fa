"""The CI variant of `make chaos`: five short seeded schedules against a real control plane and three real
agents, every invariant checked. `make chaos` runs 50 schedules of 60 s.

half_open is left out here: the agent does not yet detect a half-open connection and stays blind for
~150 s (tests/chaos/test_known_bugs.py pins it); put it back when that test passes.

Safety (no violation, evidence of every kind) is asserted outright. A schedule that did not recover fails
the test too, unless an agent's log shows the one known cause — uvloop's poisoned file descriptor
("File descriptor N is used by transport", MagicStack/uvloop#653: after a connect cancelled or reset, the
agent's event loop refuses every new connection for good) — and then the test is marked xfail with the
seeds, visibly. Remove that escape when the agent no longer runs on an affected uvloop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.testing.chaos.run import UNRECOVERED, run_one

pytestmark = pytest.mark.e2e

SEEDS = range(1, 6)
DURATION = 10.0
RECOVERY = 45.0
EXCLUDE = frozenset({"half_open"})
UVLOOP_FD = "is used by transport"


def _poisoned_agents(workdir: Path) -> list[str]:
    return [log.stem for log in sorted(workdir.glob("node-*.log")) if UVLOOP_FD in log.read_text(errors="replace")]


@pytest.mark.timeout(600)
async def test_short_seeded_schedules_keep_every_invariant(tmp_path: Path) -> None:
    reports = [await run_one(seed, DURATION, tmp_path / f"seed-{seed}", EXCLUDE, RECOVERY) for seed in SEEDS]
    text = "\n".join(r.text() for r in reports)
    assert sum(len(r.faults) for r in reports) >= 2 * len(SEEDS), text
    assert not [v for r in reports for v in r.violations], text
    assert not [r.error for r in reports if r.error and not r.error.startswith(UNRECOVERED)], text
    unrecovered = {r.seed: _poisoned_agents(tmp_path / f"seed-{r.seed}") for r in reports if r.error}
    assert all(unrecovered.values()), f"unrecovered without the known cause: {unrecovered}\n{text}"
    if unrecovered:
        pytest.xfail(f"known agent bug (uvloop poisoned fd) kept seeds {unrecovered} from recovering")
