"""The API server asks discovery and metrics.k8s.io only of paths that name no resource (app.py `_dispatch`).

That order is only right if no path either of them answers parses as a resource's (`parse_target`): every discovery
document's path, and every metrics.k8s.io path, with the slashes a client may add.
"""

from __future__ import annotations

import pytest

from kubelite.apiserver import discovery, metrics_api
from kubelite.apiserver.request import parse_target


def _discovery_paths() -> list[str]:
    paths = ["/version", "/api", "/apis", "/api/v1", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v2"]
    for gv in discovery.groups():
        if "/" in gv:
            paths += [f"/apis/{gv.split('/')[0]}", f"/apis/{gv}", f"/openapi/v3/apis/{gv}"]
    return paths


def _metrics_paths() -> list[str]:
    prefix = metrics_api.PREFIX
    return [prefix.rstrip("/"), f"{prefix}nodes", f"{prefix}nodes/n1", f"{prefix}pods", f"{prefix}namespaces/d/pods",
            f"{prefix}namespaces/d/pods/p"]


@pytest.mark.parametrize("path", [p + tail for p in _discovery_paths() + _metrics_paths() for tail in ("", "/", "//")])
def test_discovery_and_metrics_paths_name_no_resource(path: str) -> None:
    assert parse_target(path) is None
    assert parse_target("/" + path) is None
