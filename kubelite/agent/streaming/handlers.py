"""The agent's streaming routes: find the pod and container a request names, then exec, attach or forward.

Errors before the upgrade are Status JSON with kubelet's codes (404 for a pod this agent does not
run, 400 for a container that is not running or a request without a command).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from kubelite.agent.container import ConfigError
from kubelite.agent.records import Record
from kubelite.agent.streaming import exec as exec_
from kubelite.agent.streaming import portforward, transport
from kubelite.agent.streaming.attach import Attached
from kubelite.api.errors import ApiError
from kubelite.clock import Clock

if TYPE_CHECKING:
    from kubelite.agent.pod_sync import PodSync


def _upgrade(request: web.Request) -> None:
    """A WebSocket upgrade (kubectl v1.32's default) or a SPDY/3.1 one (its fallback); nothing else streams."""
    if request.headers.get("Upgrade", "").lower() != "websocket" and not transport.is_spdy(request):
        raise ApiError(400, "BadRequest", "Upgrade request required")


def _refuse(err: ApiError) -> web.Response:
    return web.json_response(err.status(), status=err.code)


class StreamingHandlers:
    def __init__(self, find: Callable[[str, str], PodSync | None], clock: Clock) -> None:
        self.find = find
        self.clock = clock

    def _running(self, request: web.Request) -> tuple[PodSync, Record]:
        ns, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        syncer = self.find(ns, name)
        if syncer is None:
            raise ApiError(404, "NotFound", f'pod "{name}" not found on this node')
        record = next((r for r in syncer.records if r.name == container), None)
        if record is None:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if record.process is None or not record.process.alive:
            raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is not running')
        return syncer, record

    async def exec(self, request: web.Request) -> web.StreamResponse:
        try:
            syncer, record = self._running(request)
            command = request.query.getall("command", [])
            if not command:
                raise ApiError(400, "BadRequest", "you must specify at least 1 command")
            _upgrade(request)
            try:
                argv, env = syncer.containers.exec_command(record, list(command))
            except ConfigError as exc:
                raise ApiError(400, "BadRequest", str(exc)) from None
        except ApiError as err:
            return _refuse(err)
        streams = transport.Streams.of(request)

        def start() -> Awaitable[exec_.Session]:
            return exec_.Command.start(argv, env, record.spec.get("workingDir"), streams)

        return await exec_.serve(request, streams, start, self.clock)

    async def attach(self, request: web.Request) -> web.StreamResponse:
        try:
            syncer, record = self._running(request)
            streams = transport.Streams.of(request)
            if streams.stdin and not (record.process is not None and record.process.has_stdin):
                raise ApiError(400, "BadRequest", f'container "{record.name}" in pod "{syncer.pod["metadata"]["name"]}"'
                                                  " has no stdin to attach to (its spec does not set stdin or tty, or "
                                                  "the agent restarted since it started)")
            _upgrade(request)
        except ApiError as err:
            return _refuse(err)
        process = record.process
        assert process is not None
        log_path = syncer.log_path(record.name, record.restarts)

        async def start() -> exec_.Session:
            return Attached(process, log_path, streams, bool(record.spec.get("stdinOnce")), self.clock)

        return await exec_.serve(request, streams, start, self.clock)

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["pod"]
        syncer = self.find(ns, name)
        try:
            if syncer is None:
                raise ApiError(404, "NotFound", f'pod "{name}" not found on this node')
            _upgrade(request)
        except ApiError as err:
            return _refuse(err)
        return await portforward.serve(request, f"{ns}/{name}", syncer.uid, self.clock)
