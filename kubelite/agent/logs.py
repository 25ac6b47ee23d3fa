"""Serving container logs (the agent's side of pods/log): tail, since, timestamps, previous, follow.

Log files are in CRI format (`<timestamp> <stream> F|P <line>`, P for a piece of a line that
continues in the next entry: a long line, or one the agent read in pieces); without `timestamps`
the prefix is stripped. `follow` keeps streaming while the container runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from kubelite.api.errors import ApiError
from kubelite.clock import Clock, parse_rfc3339

if TYPE_CHECKING:
    from kubelite.agent.pod_sync import PodSync

FOLLOW_POLL = 0.1


def _bool(value: str | None) -> bool:
    return (value or "").lower() in ("1", "t", "true")


def _format(line: bytes, timestamps: bool) -> bytes:
    ts, _, rest = line.partition(b" ")
    _stream, _, rest = rest.partition(b" ")
    tag, _, text = rest.partition(b" ")
    if tag == b"P":  # a partial line continues in the next entry
        text = text.removesuffix(b"\n")
    return ts + b" " + text if timestamps else text


async def serve(request: web.Request, worker: PodSync, container: str, clock: Clock) -> web.StreamResponse:
    record = next((r for r in worker.records if r.name == container), None)
    if record is None:
        pod_name = worker.pod["metadata"]["name"]
        err = ApiError(400, "BadRequest", f"container {container} is not valid for pod {pod_name}")
        return web.json_response(err.status(), status=400)
    q = request.query
    previous = _bool(q.get("previous"))
    restarts = record.restarts - 1 if previous else record.restarts
    path = worker.log_path(container, restarts)
    if (previous and restarts < 0) or not path.exists():
        reason = "previous terminated container" if previous else "container"
        err = ApiError(400, "BadRequest", f'{reason} "{container}" in pod "{worker.pod["metadata"]["name"]}" '
                                          "not found" if previous else
                       f'container "{container}" in pod "{worker.pod["metadata"]["name"]}" is waiting to start: '
                       f"{record.waiting or 'ContainerCreating'}")
        return web.json_response(err.status(), status=400)
    lines = path.read_bytes().splitlines(keepends=True)
    since = q.get("sinceSeconds")
    if since:
        cutoff = clock.now() - float(since)
        lines = [ln for ln in lines if parse_rfc3339(ln.split(b" ", 1)[0].decode()[:19] + "Z") >= int(cutoff)]
    tail = q.get("tailLines")
    if tail is not None and int(tail) >= 0:
        lines = lines[len(lines) - int(tail):] if int(tail) else []
    timestamps = _bool(q.get("timestamps"))
    body = b"".join(_format(ln, timestamps) for ln in lines)
    limit = q.get("limitBytes")
    if limit:
        body = body[: int(limit)]
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    await resp.write(body)
    if _bool(q.get("follow")) and not previous:
        offset = path.stat().st_size
        with path.open("rb") as f:
            f.seek(offset)
            pending = b""
            while True:
                chunk = f.read()
                if chunk:
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    out = b"".join(_format(ln + b"\n", timestamps) for ln in complete)
                    if out:
                        await resp.write(out)
                elif not record.running or worker.gone:
                    break
                await clock.sleep(FOLLOW_POLL)
    await resp.write_eof()
    return resp
