"""The memoized path parsers (routing, metrics labels): the same answers as parsing, and only short paths kept."""

from __future__ import annotations

import pytest

from kubelite.apiserver import metrics, request
from kubelite.apiserver.metrics import request_info
from kubelite.apiserver.request import CACHED_PATH, parse_target

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"


@pytest.mark.parametrize(("path", "kept"), [
    pytest.param(LEASE + "node-1", True, id="a component's path: remembered"),
    pytest.param("/api/v1/namespaces/default/pods/p/status", True, id="a subresource: remembered"),
    pytest.param("/api/v1/widgets", True, id="no resource: remembered as None"),
    pytest.param(LEASE + "n" * (CACHED_PATH - len(LEASE)), True, id="at the length bound: remembered"),
    pytest.param(LEASE + "n" * (CACHED_PATH + 1 - len(LEASE)), False, id="over the bound: parsed, not kept"),
    pytest.param("/api/v1/namespaces/" + "x" * 8000 + "/pods", False, id="a hostile 8 KB path: not kept"),
])
def test_memoized_parsers_agree_and_keep_only_short_paths(path: str, kept: bool) -> None:
    request._remembered_target.cache_clear()
    metrics._remembered_info.cache_clear()
    assert parse_target(path) == request._parse_target(path)
    assert request_info("PATCH", path) == metrics._request_info("PATCH", path, False, False, "")
    assert request._remembered_target.cache_info().currsize == int(kept)
    assert metrics._remembered_info.cache_info().currsize == int(kept)
