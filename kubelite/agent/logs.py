"""Serving container logs (the agent's side of pods/log): tail, since, timestamps, previous, follow.

Log files are in CRI format (`<timestamp> <stream> F|P <line>`, P for a piece of a line that
continues in the next entry: a long line, or one the agent read in pieces); without `timestamps`
the prefix is stripped. `follow` keeps streaming while the container runs. `sinceSeconds` or
`sinceTime` skip the lines stamped before it, at the stamps' full precision (kubelet's ReadLogs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from aiohttp import web

from kubelite.agent.runtime.cri_log import TIMESTAMP_LEN, cri_timestamp
from kubelite.api.errors import ApiError
from kubelite.clock import Clock, parse_rfc3339

if TYPE_CHECKING:
    from kubelite.agent.pod_sync import PodSync

FOLLOW_POLL = 0.1
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63
_TRUE, _FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")  # strconv.ParseBool


class _Undecodable(ValueError):
    pass


@dataclass(frozen=True)
class LogOptions:
    """kubelet's PodLogOptions as its log reader uses them (kuberuntime/logs.NewLogOptions)."""

    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail: int | None = None
    limit: int | None = None
    # Lines stamped before this are skipped: as an entry's stamp (cri_log.cri_timestamp), whose fixed width and
    # UTC make the text compare as the time does.
    since: bytes | None = None

    def keep(self, line: bytes) -> bool:
        """ReadLogs: a line is skipped when its timestamp is before `since`."""
        return self.since is None or line[:TIMESTAMP_LEN] >= self.since


def _flag(q: Mapping[str, str], name: str) -> bool:
    value = q.get(name)
    if value is None or value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise _Undecodable(name)


def _int(q: Mapping[str, str], name: str) -> int | None:
    value = q.get(name)
    if value is None:
        return None
    if not _INTEGER.fullmatch(value) or not -_INT64 <= int(value) < _INT64:  # strconv.ParseInt(s, 10, 64): no
        raise _Undecodable(name)  # "1_0" or spaces, as Python's int() takes, and in int64's range
    return int(value)


def log_options(q: Mapping[str, str], now: float) -> LogOptions | web.Response:
    """The query decoded as kubelet's getContainerLogs does: the legacy `tail` ("all": every line), a value that
    does not parse is 400 `Unable to decode query.`, one ValidatePodLogOptions refuses (tailLines < 0,
    limitBytes < 1, sinceSeconds < 1, or both sinceSeconds and sinceTime) is 422 `Invalid request.`. Then
    NewLogOptions: `since` is now - sinceSeconds, or sinceTime."""
    q = dict(q)
    if "tail" in q:
        tail = q.pop("tail")
        if tail != "all":
            q["tailLines"] = tail
    try:
        opts = LogOptions(_flag(q, "follow"), _flag(q, "previous"), _flag(q, "timestamps"), _int(q, "tailLines"),
                          _int(q, "limitBytes"))
        since_seconds = _int(q, "sinceSeconds")
        since_time = q.get("sinceTime")
        if since_time is not None and not _RFC3339.fullmatch(since_time):
            raise _Undecodable("sinceTime")
    except _Undecodable:
        return web.Response(status=400, text='{"message": "Unable to decode query."}')
    if (opts.tail is not None and opts.tail < 0) or (opts.limit is not None and opts.limit < 1) or \
            (since_seconds is not None and (since_seconds < 1 or since_time is not None)):
        return web.Response(status=422, text='{"message": "Invalid request."}')
    try:
        if since_seconds is not None:  # further back than the epoch is every line
            return replace(opts, since=cri_timestamp(max(0.0, now - since_seconds)).encode())
        if since_time is not None:
            return replace(opts, since=cri_timestamp(parse_rfc3339(since_time)).encode())
    except (ValueError, OverflowError):  # a time the form admits but the calendar does not: month 13, year 0
        return web.Response(status=400, text='{"message": "Unable to decode query."}')
    return opts


def _format(line: bytes, timestamps: bool) -> bytes:
    ts, _, rest = line.partition(b" ")
    _stream, _, rest = rest.partition(b" ")
    tag, _, text = rest.partition(b" ")
    if tag == b"P":  # a partial line continues in the next entry
        text = text.removesuffix(b"\n")
    return ts + b" " + text if timestamps else text


async def serve(request: web.Request, worker: PodSync, container: str, clock: Clock) -> web.StreamResponse:
    opts = log_options(request.query, clock.now())
    if isinstance(opts, web.Response):
        return opts
    record = next((r for r in worker.records if r.name == container), None)
    if record is None:
        pod_name = worker.pod["metadata"]["name"]
        err = ApiError(400, "BadRequest", f"container {container} is not valid for pod {pod_name}")
        return web.json_response(err.status(), status=400)
    previous = opts.previous
    restarts = record.restarts - 1 if previous else record.restarts
    path = worker.log_path(container, restarts)
    if (previous and restarts < 0) or not path.exists():
        reason = "previous terminated container" if previous else "container"
        err = ApiError(400, "BadRequest", f'{reason} "{container}" in pod "{worker.pod["metadata"]["name"]}" '
                                          "not found" if previous else
                       f'container "{container}" in pod "{worker.pod["metadata"]["name"]}" is waiting to start: '
                       f"{record.waiting or 'ContainerCreating'}")
        return web.json_response(err.status(), status=400)
    lines = [ln for ln in path.read_bytes().splitlines(keepends=True) if opts.keep(ln)]
    if opts.tail is not None:
        lines = lines[len(lines) - opts.tail:] if opts.tail else []
    body = b"".join(_format(ln, opts.timestamps) for ln in lines)
    if opts.limit is not None:
        body = body[:opts.limit]
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    await resp.write(body)
    if opts.follow and not previous:
        offset = path.stat().st_size
        with path.open("rb") as f:
            f.seek(offset)
            pending = b""
            while True:
                chunk = f.read()
                if chunk:
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    out = b"".join(_format(ln + b"\n", opts.timestamps) for ln in complete if opts.keep(ln))
                    if out:
                        await resp.write(out)
                elif not record.running or worker.gone:
                    break
                await clock.sleep(FOLLOW_POLL)
    await resp.write_eof()
    return resp
