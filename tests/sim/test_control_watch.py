"""Which watches a served simulation bounds with a lifetime of its own drawing (control._unbounded_watch): those
with no timeout, as the API server reads `timeoutSeconds` — absent, empty or 0 is none."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from kubelite.sim.control import _unbounded_watch


@pytest.mark.parametrize(("query", "unbounded"), [
    pytest.param("watch=true", True, id="a watch without a timeout"),
    pytest.param("watch=1&timeoutSeconds=0", True, id="timeoutSeconds=0 is no timeout, as the API server takes it"),
    pytest.param("watch=true&timeoutSeconds=", True, id="an empty timeoutSeconds is none"),
    pytest.param("watch=true&timeoutSeconds=30", False, id="a watch with its own timeout"),
    pytest.param("timeoutSeconds=0", False, id="a list is no watch"),
    pytest.param("watch=maybe", False, id="a watch flag the API server refuses is left to it"),
])
def test_unbounded_watch(query: str, unbounded: bool) -> None:
    assert _unbounded_watch(make_mocked_request("GET", f"/api/v1/pods?{query}")) is unbounded
