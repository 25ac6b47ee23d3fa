"""`--controllers` selection, with kube-controller-manager's syntax."""

from __future__ import annotations

import pytest

from kubelite.controllers import registry
from kubelite.controllers.manager import select


@pytest.mark.parametrize(("spec", "want"), [
    pytest.param("*", sorted(registry.CONTROLLERS), id="star: every controller"),
    pytest.param("", sorted(registry.CONTROLLERS), id="default: every controller"),
    pytest.param("replicaset,deployment", ["deployment", "replicaset"], id="named ones only"),
    pytest.param("*,-namespace,-disruption", sorted(set(registry.CONTROLLERS) - {"namespace", "disruption"}),
                 id="star minus some"),
])
def test_select(spec: str, want: list[str]) -> None:
    assert sorted(select(spec)) == want


def test_select_unknown_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the list of known controllers"):
        select("replicaset,nosuch")
