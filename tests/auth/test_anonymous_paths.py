"""Anonymous requests to kube-public/cluster-info with --anonymous-auth off (upstream's anonymous `conditions`,
which kubeadm's discovery needs): only that path, only without a credential; RBAC then decides (GET only)."""

from __future__ import annotations

import pytest

from kubelite.apiserver.auth.authenticator import AuthRequest, BearerToken, Union
from kubelite.apiserver.auth.bootstraptoken import CLUSTER_INFO_PATH
from kubelite.apiserver.auth.tokenfile import StaticTokens
from kubelite.apiserver.auth.user import UserInfo

UNION = Union([BearerToken([StaticTokens({"good": UserInfo("admin")})])], anonymous=False,
              anonymous_paths=frozenset({CLUSTER_INFO_PATH}))
CASES = [  # (name, path, headers, user name or None for 401)
    ("no credential to cluster-info: anonymous", CLUSTER_INFO_PATH, {}, "system:anonymous"),
    ("no credential elsewhere: 401", "/api/v1/namespaces/kube-public/configmaps/other", {}, None),
    ("no credential to kube-public's list: 401", "/api/v1/namespaces/kube-public/configmaps", {}, None),
    ("a bad token to cluster-info is still a 401", CLUSTER_INFO_PATH, {"Authorization": "Bearer bad"}, None),
    ("a good token to cluster-info is its user", CLUSTER_INFO_PATH, {"Authorization": "Bearer good"}, "admin"),
]


@pytest.mark.parametrize("name,path,headers,expected", CASES, ids=[c[0] for c in CASES])
def test_anonymous_paths(name: str, path: str, headers: dict[str, str], expected: str | None) -> None:
    user = UNION.authenticate(AuthRequest(headers, path=path))
    assert (user.name if user else None) == expected
