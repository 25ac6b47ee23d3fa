"""Fuzz profiles: CI runs a fixed-seed sample in about a minute; `KUBELITE_FUZZ=campaign` runs a long campaign.

`KUBELITE_FUZZ_EXAMPLES` scales the campaign (examples per property; the API fuzzer sends one request per
example), e.g. `KUBELITE_FUZZ=campaign KUBELITE_FUZZ_EXAMPLES=5000 pytest --timeout=0 tests/fuzz`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("ci", derandomize=True, max_examples=300, deadline=None, suppress_health_check=_SLOW,
                          database=None)
settings.register_profile("campaign", max_examples=int(os.environ.get("KUBELITE_FUZZ_EXAMPLES", "5000")),
                          deadline=None, suppress_health_check=_SLOW, database=None)
settings.load_profile("campaign" if os.environ.get("KUBELITE_FUZZ") == "campaign" else "ci")
