"""A client given several API servers (an HA control plane) moves to the next when the one in use fails.

Real loopback sockets (tests/client/test_transport_errors.py's `raw_server`), each answering as a
server in one state would: refusing connections (SIGKILLed), answering 503, cutting the request,
or answering normally with its own name so the test sees which server served a call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import pytest

from kubelite.api.errors import ApiError, Unavailable
from kubelite.client.http import ApiClient, server_list
from tests.client.test_transport_errors import (
    EVENT,
    STATUS_409,
    STATUS_503,
    Behaviour,
    chunked,
    raw_server,
    replies,
    response,
)

REFUSED = None


def answers(name: str) -> Behaviour:
    return replies(response("200 OK", b'{"served_by":"%s"}' % name.encode()))


def watch_from(name: str) -> Behaviour:
    event = b'{"type":"ADDED","object":{"metadata":{"name":"%s","resourceVersion":"7"}}}\n' % name.encode()
    return replies(chunked(event) + b"0\r\n\r\n")


@contextlib.asynccontextmanager
async def servers(behaviours: Sequence[Behaviour | None]) -> AsyncIterator[ApiClient]:
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(raw_server(b)) for b in behaviours]
        client = ApiClient(",".join(urls), read_timeout=2)
        try:
            yield client
        finally:
            await client.close()


async def outcome(client: ApiClient) -> str:
    """Who answered the call (its name), or the error it raised."""
    try:
        body = await asyncio.wait_for(client.get("/api/v1/pods"), 20)
    except Unavailable:
        return "Unavailable"
    except ApiError as exc:
        return exc.reason
    return str(body["served_by"])


@pytest.mark.parametrize(("behaviours", "first", "second"), [
    pytest.param([REFUSED, answers("b")], "b", "b",
                 id="refused connection: the same call is answered by the next server, which stays in use"),
    pytest.param([replies(response("503 Service Unavailable", STATUS_503)), answers("b")], "Unavailable", "b",
                 id="503: the call fails, the next call goes to the next server"),
    pytest.param([replies(b""), answers("b")], "Unavailable", "b",
                 id="request cut after sending (it may have landed): not retried, the next call goes on"),
    pytest.param([REFUSED, REFUSED, REFUSED], "Unavailable", "Unavailable",
                 id="every server refuses: Unavailable once each was tried"),
    pytest.param([replies(response("409 Conflict", STATUS_409)), answers("b")], "Conflict", "Conflict",
                 id="an API error is an answer: no failover"),
    pytest.param([answers("a"), answers("b")], "a", "a", id="a healthy server stays in use"),
])
async def test_request_fails_over(behaviours: list[Behaviour | None], first: str, second: str) -> None:
    async with servers(behaviours) as client:
        assert [await outcome(client), await outcome(client)] == [first, second]


async def test_calls_failing_together_move_on_once() -> None:
    """Calls in flight when a server dies all fail; only the first moves the client on, so the others do not
    skip the next server, which is alive."""
    async with servers([replies(b""), answers("b"), answers("c")]) as client:
        assert await asyncio.gather(*(outcome(client) for _ in range(5))) == ["Unavailable"] * 5
        assert await outcome(client) == "b"


async def test_watch_cut_resumes_on_the_next_server() -> None:
    """A watch whose server dies ends with Unavailable; the informer's next watch goes to the next server."""
    async with servers([replies(chunked(EVENT, b'{"type":"MODIFIED","obj')), watch_from("b")]) as client:
        seen: list[str] = []
        with pytest.raises(Unavailable):
            async for event in client.watch("/api/v1/pods", {}):
                seen.append(event["object"]["metadata"]["name"])
        async for event in client.watch("/api/v1/pods", {}):
            seen.append(event["object"]["metadata"]["name"])
    assert seen == ["a", "b"]


@pytest.mark.parametrize(("given", "urls"), [
    pytest.param("https://a:6443", ("https://a:6443",), id="one URL"),
    pytest.param("https://a:6443/, https://b:6443", ("https://a:6443", "https://b:6443"),
                 id="comma-separated, spaces and trailing slashes dropped"),
    pytest.param(["https://a:6443", "https://b:6443"], ("https://a:6443", "https://b:6443"), id="a sequence"),
])
def test_server_list(given: str | list[str], urls: tuple[str, ...]) -> None:
    assert server_list(given) == urls


@pytest.mark.parametrize("given", [pytest.param("", id="empty"), pytest.param(" , ", id="only commas")])
def test_server_list_refuses_no_url(given: str) -> None:
    with pytest.raises(ValueError, match="no API server URL"):
        server_list(given)
