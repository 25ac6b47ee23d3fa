"""`rfc3339` remembers the last second it formatted: a run of calls, in any order, answers as strftime does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubelite.clock import rfc3339

SEQUENCES = [
    pytest.param([1_700_000_000.0, 1_700_000_000.9, 1_700_000_000.0], id="the same second, fractions dropped"),
    pytest.param([1_700_000_000.5, 1_700_000_001.0, 1_700_000_000.99], id="the next second, then back"),
    pytest.param([0.0, 253402300799.0, 0.4, 59.999], id="the epoch, the last representable second"),
]


@pytest.mark.parametrize("stamps", SEQUENCES)
def test_each_call_answers_for_its_own_second(stamps: list[float]) -> None:
    for ts in stamps:
        assert rfc3339(ts) == datetime.fromtimestamp(int(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
