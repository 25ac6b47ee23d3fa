"""pods/log: proxied to the node agent that runs the pod, as kube-apiserver proxies to kubelet.

The agent is reached over TLS with the API server's client certificate (node_connection.py); the
response (chunked for `follow`) is streamed through unchanged.
"""

from __future__ import annotations

import ssl

import aiohttp
from aiohttp import web
from yarl import URL

from kubelite.api import errors, validation
from kubelite.apiserver import node_connection
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.pods import PODS, container_names
from kubelite.apiserver.request import parse_bool, parse_int
from kubelite.apiserver.rest import Registry
from kubelite.clock import parse_rfc3339

LOG_PARAMS = ("container", "follow", "previous", "tailLines", "sinceSeconds", "sinceTime", "timestamps",
              "limitBytes")


def log_options(request: web.Request, name: str) -> dict[str, str]:
    """PodLogOptions from the query: malformed values are 400, out-of-range ones 422 (ValidatePodLogOptions)."""
    q = request.query
    for flag in ("follow", "previous", "timestamps"):
        parse_bool(q.get(flag), flag)
    causes = []
    for field, low, detail in (("tailLines", 0, "must be greater than or equal to 0"),
                               ("limitBytes", 1, "must be greater than 0"),
                               ("sinceSeconds", 1, "must be greater than 0")):
        number = parse_int(q.get(field), field)
        if number is not None and number < low:
            causes.append(validation.invalid(field, number, detail))
    if q.get("sinceTime"):
        try:
            parse_rfc3339(q["sinceTime"])
        except ValueError:
            raise errors.bad_request(f'invalid value for sinceTime: "{q["sinceTime"][:64]}": must be RFC 3339') \
                from None
        if q.get("sinceSeconds"):
            causes.append(validation.forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    if causes:
        raise errors.invalid("PodLogOptions", name, causes)
    return {k: q[k] for k in LOG_PARAMS if k in q}


def pick_container(pod: Obj, requested: str | None) -> str:
    """The named container, or the pod's only one; 400 as upstream when neither is given or it is unknown."""
    name = pod["metadata"]["name"]
    containers = [c["name"] for c in pod["spec"].get("containers") or []]
    container = requested or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                 f"[{' '.join(containers)}]")
    if container not in container_names(pod["spec"]):
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


async def proxy(request: web.Request, registry: Registry, tls: ssl.SSLContext, namespace: str,
                name: str) -> web.StreamResponse:
    pod = registry.current(PODS, namespace, name)
    params = log_options(request, name)
    container = pick_container(pod, request.query.get("container"))
    agent = node_connection.endpoint(registry, pod, f'container "{container}" in pod "{name}"')
    params["container"] = container
    url = URL.build(scheme="https", host=agent.host, port=agent.port,
                    path=f"/containerLogs/{namespace}/{name}/{container}")
    try:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        async with session, session.get(url, params=params, ssl=tls) as upstream:
            resp = web.StreamResponse(status=upstream.status,
                                      headers={"Content-Type": upstream.headers.get("Content-Type", "text/plain")})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp
    except aiohttp.ClientError as exc:
        raise errors.ApiError(503, "ServiceUnavailable", f"the node agent on {agent.node} is unreachable: {exc}") \
            from None
