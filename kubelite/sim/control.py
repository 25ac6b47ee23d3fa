"""Controlling a served simulation (`kubelite sim serve`): pause, resume, change speed, step simulated time.

The served app is the API server's own (every other path goes to its middleware and dispatch, as
`kubelite server` serves it) plus one non-resource path, `/simulation`:

    GET  /simulation                      the state: simulated time, speed, paused, a step under way
    POST /simulation/pause                time stands still (kubectl still reads and writes)
    POST /simulation/resume               time runs again at the current speed
    POST /simulation/speed?value=N        N simulated seconds per real second
    POST /simulation/step?duration=D      pause, run the next D of simulated time as fast as the work
                                          allows, answer when it is done (paused at its end)

Bad input is a Kubernetes Status 400, as for any API path. `kubelite sim control` is the client.

Reading the served cluster leaves its simulation as `sim run` runs it (tests/sim/test_serve_replay.py): the one
read that drew from the process's random generator — which the run seeds and its components draw from — the
lifetime of a watch asking for none, is drawn here from a generator of the served app's own.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from aiohttp import web

from kubelite.agent.config import NodeConfigError, duration
from kubelite.api import errors
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.request import parse_bool
from kubelite.apiserver.watch import MIN_REQUEST_TIMEOUT
from kubelite.clock import rfc3339
from kubelite.sim.clock import ControlledLoop, VirtualClock

PATH = "/simulation"
ACTIONS = ("status", "pause", "resume", "speed", "step")


def _unbounded_watch(request: web.Request) -> bool:
    try:
        return parse_bool(request.query.get("watch"), "watch") and \
            request.query.get("timeoutSeconds") in (None, "", "0")  # 0 is none, as the API server takes it
    except errors.ApiError:  # the API server answers it (400)
        return False


def _rounded(state: dict[str, Any]) -> dict[str, Any]:
    """Times to the millisecond, as the event log has them: the loop's time is a sum of timer delays, and a 90 s
    step would read 90.00000000000001."""
    return {k: round(v, 3) if k in ("time", "stepUntil") and isinstance(v, float) else v for k, v in state.items()}


def app(server: ApiServer, loop: ControlledLoop, clock: VirtualClock) -> web.Application:
    def state() -> web.Response:
        return web.json_response({"kind": "SimulationState", **_rounded(loop.state()), "now": rfc3339(clock.now())})

    def bad(message: str) -> web.Response:
        return web.json_response(errors.bad_request(message).status(), status=400)

    async def status(_: web.Request) -> web.Response:
        return state()

    async def pause(_: web.Request) -> web.Response:
        loop.pause()
        return state()

    async def resume(_: web.Request) -> web.Response:
        loop.resume()
        return state()

    async def speed(request: web.Request) -> web.Response:
        try:
            loop.set_speed(float(request.query.get("value", "")))
        except ValueError:
            return bad(f"speed: value must be a positive number, not {request.query.get('value')!r}")
        return state()

    async def step(request: web.Request) -> web.Response:
        text = request.query.get("duration", "")
        try:
            plain = text.replace(".", "", 1)  # ASCII: "²".isdigit() is true and float() then raises
            seconds = float(text) if plain.isascii() and plain.isdigit() else duration(text)
        except NodeConfigError:
            return bad(f"step: duration must be seconds or a duration such as 30s, 5m, 1h, not {text!r}")
        await loop.step(seconds)
        return state()

    lifetimes = random.Random()  # not the simulation's generator (see the module doc)

    async def api(request: web.Request) -> web.StreamResponse:
        if _unbounded_watch(request):
            lifetime = lifetimes.randint(MIN_REQUEST_TIMEOUT, 2 * MIN_REQUEST_TIMEOUT)  # as open_stream
            request = request.clone(rel_url=request.rel_url.update_query(timeoutSeconds=str(lifetime)))
        return await server._middleware(request, server._dispatch)

    out = web.Application(client_max_size=8 * 1024 * 1024)
    out.router.add_get(PATH, status)
    for name, handler in (("pause", pause), ("resume", resume), ("speed", speed), ("step", step)):
        out.router.add_post(f"{PATH}/{name}", handler)
    out.router.add_route("*", "/{tail:.*}", api)
    return out


def call(server: str, action: str, value: str | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """The client side, for `kubelite sim control`: one action, the state afterwards (ApiError-like on 4xx)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    url = server.rstrip("/") + PATH + ("" if action == "status" else f"/{action}")
    if action in ("speed", "step"):
        if value is None:
            raise ValueError(f"{action}: a value is required")
        url += "?" + urllib.parse.urlencode({"value" if action == "speed" else "duration": value})
    req = urllib.request.Request(url, method="GET" if action == "status" else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            out: dict[str, Any] = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise ValueError(json.load(exc).get("message", str(exc))) from None
    return out
