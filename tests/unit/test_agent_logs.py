"""The agent's pods/log (kubelite/agent/logs.py) over real HTTP against a real CRI log file: kubelet's decoding and
ValidatePodLogOptions cases (pkg/apis/core/validation, kubelet's server.go getContainerLogs answers), and
ReadLogs' since filtering (pkg/kubelet/kuberuntime/logs/logs_test.go TestReadLogs) for sinceTime and sinceSeconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kubelite.agent import logs
from kubelite.agent.runtime.cri_log import entries
from kubelite.clock import FakeClock, rfc3339

T0 = 1_795_000_000.0  # the log's first line; lines follow at T0 + 0.5, T0 + 1.25, T0 + 2
STAMPS = (0.0, 0.5, 1.25, 2.0)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    log = tmp_path / "main" / "0.log"
    log.parent.mkdir()
    log.write_bytes(b"".join(entries(b"stdout", f"line{i}\n".encode(), T0 + dt) for i, dt in enumerate(STAMPS)))
    record = SimpleNamespace(name="main", restarts=0, running=False, waiting="")
    worker = SimpleNamespace(records=[record], pod={"metadata": {"name": "p"}}, gone=True,
                             log_path=lambda name, restarts: tmp_path / name / f"{restarts}.log")
    clock = FakeClock(start=T0 + 3)

    async def handler(request: web.Request) -> web.StreamResponse:
        return await logs.serve(request, worker, "main", clock)  # type: ignore[arg-type]

    app = web.Application()
    app.router.add_get("/containerLogs/default/p/main", handler)
    async with TestClient(TestServer(app)) as c:
        yield c


async def _get(client: TestClient[Any, Any], **query: str) -> tuple[int, str]:
    resp = await client.get("/containerLogs/default/p/main", params=query)
    return resp.status, await resp.text()


# TestValidatePodLogOptions's cases, as kubelet answers them (422 "Invalid request."), and its decoding (400).
REFUSED = [
    pytest.param({"tailLines": "-8"}, 422, id="Invalid podLogOptions with Negative TailLines"),
    pytest.param({"limitBytes": "0"}, 422, id="Invalid podLogOptions with zero or negative LimitBytes"),
    pytest.param({"sinceSeconds": "10", "sinceTime": rfc3339(T0)}, 422,
                 id="Invalid podLogOptions with both SinceSeconds and SinceTime set"),
    pytest.param({"sinceSeconds": "0"}, 422, id="Invalid podLogOptions with zero or negative SinceSeconds"),
    pytest.param({"sinceTime": "2026-11-28"}, 400, id="a sinceTime that is not RFC 3339 does not decode"),
    pytest.param({"tailLines": "x"}, 400, id="a tailLines that is not a number does not decode"),
    pytest.param({"follow": "yes"}, 400, id="a flag that strconv.ParseBool refuses does not decode"),
    pytest.param({"tailLines": "1_0"}, 400, id="an integer in Python's syntax but not strconv's does not decode"),
    pytest.param({"sinceSeconds": "99999999999999999999999"}, 400, id="an integer beyond int64 does not decode"),
    pytest.param({"sinceTime": "2026-13-01T00:00:00Z"}, 400, id="a sinceTime in RFC 3339's form but no date"),
]


@pytest.mark.parametrize("query,status", REFUSED)
async def test_refused(client: TestClient[Any, Any], query: dict[str, str], status: int) -> None:
    want = '{"message": "Invalid request."}' if status == 422 else '{"message": "Unable to decode query."}'
    assert await _get(client, **query) == (status, want)


SERVED = [
    pytest.param({}, "line0\nline1\nline2\nline3\n", id="default log options should output all lines"),
    pytest.param({"tailLines": "2"}, "line2\nline3\n", id="using TailLines 2 should output last 2 lines"),
    pytest.param({"tail": "all"}, "line0\nline1\nline2\nline3\n", id="the legacy tail=all is every line"),
    pytest.param({"sinceTime": rfc3339(T0 + 1)}, "line2\nline3\n",
                 id="using SinceTime should output lines with a time on or after the specified time"),
    pytest.param({"sinceTime": rfc3339(T0 + 1)[:-1] + ".25Z"}, "line2\nline3\n",
                 id="a line stamped exactly at sinceTime is kept"),
    pytest.param({"sinceTime": rfc3339(T0 + 1)[:-1] + ".250001Z"}, "line3\n",
                 id="a line a microsecond before sinceTime is skipped"),
    pytest.param({"sinceTime": rfc3339(T0 + 60)}, "", id="a sinceTime after every line: none"),
    pytest.param({"sinceSeconds": "100000000000000"}, "line0\nline1\nline2\nline3\n",
                 id="a sinceSeconds reaching before the epoch is every line"),
    pytest.param({"sinceSeconds": "2"}, "line2\nline3\n",
                 id="sinceSeconds at full precision: now - 2 s is T0 + 1, a line at T0 + 0.5 is older"),
    pytest.param({"sinceTime": rfc3339(T0), "tailLines": "1"}, "line3\n", id="sinceTime with tailLines"),
]


@pytest.mark.parametrize("query,want", SERVED)
async def test_served(client: TestClient[Any, Any], query: dict[str, str], want: str) -> None:
    assert await _get(client, **query) == (200, want)
