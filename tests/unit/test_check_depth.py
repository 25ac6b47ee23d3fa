"""`nesting.check_depth`: the orjson fast path and the walk draw the line at the same depth."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kubelite.apiserver.nesting import MAX_DEPTH, ORJSON_DEPTH, TooDeep, check_depth


def _nested(depth: int, container: str, leaf: Any = 1) -> Any:
    doc: Any = {"leaf": leaf} if container == "dict" else [leaf]
    for _ in range(depth - 1):
        doc = {"a": doc} if container == "dict" else [doc]
    return doc


@pytest.mark.parametrize(("depth", "container", "leaf", "limit", "refused"), [
    pytest.param(ORJSON_DEPTH, "dict", 1, MAX_DEPTH, False, id="as deep as orjson writes: accepted"),
    pytest.param(ORJSON_DEPTH + 1, "list", 1, MAX_DEPTH, False, id="deeper than orjson writes: the walk accepts"),
    pytest.param(MAX_DEPTH, "dict", 1, MAX_DEPTH, False, id="at the limit: accepted"),
    pytest.param(MAX_DEPTH + 1, "list", 1, MAX_DEPTH, True, id="one level over the limit: refused"),
    pytest.param(MAX_DEPTH + 1, "dict", 1, MAX_DEPTH + 2, False, id="a JSON patch's allowance"),
    pytest.param(5, "dict", 1, 4, True, id="a limit below orjson's: always walked"),
    pytest.param(10, "dict", 2 ** 70, MAX_DEPTH, False, id="an integer orjson cannot write: walked"),
    pytest.param(MAX_DEPTH + 1, "dict", datetime.date(2026, 1, 1), MAX_DEPTH, True,
                 id="a YAML date deep down: walked and refused"),
])
def test_depth_bound(depth: int, container: str, leaf: Any, limit: int, refused: bool) -> None:
    doc = _nested(depth, container, leaf)
    if refused:
        with pytest.raises(TooDeep):
            check_depth(doc, limit)
    else:
        check_depth(doc, limit)
