"""pods/log: proxied to the node agent that runs the pod, as kube-apiserver proxies to kubelet.

The agent's endpoint is the node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`;
the response (chunked for `follow`) is streamed through unchanged.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from yarl import URL

from kubelite.api import errors, validation
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.core import NODES
from kubelite.apiserver.registry.pods import PODS, all_containers
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


def agent_url(node: Obj | None, path: str) -> URL | None:
    """The node agent's URL for `path`: the node's InternalIP and its kubeletEndpoint port (None if unknown)."""
    status = (node or {}).get("status") or {}
    port = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint", {}).get("Port")
    address = next((a["address"] for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), None)
    if not port or not address:
        return None
    return URL.build(scheme="http", host=address, port=int(port), path=path)


async def proxy(request: web.Request, registry: Registry, namespace: str, name: str) -> web.StreamResponse:
    pod = registry.current(PODS, namespace, name)
    params = log_options(request, name)
    containers = [c["name"] for c in pod["spec"].get("containers") or []]
    container = request.query.get("container") or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                 f"[{' '.join(containers)}]")
    if container not in {c.get("name") for _, _, c in all_containers(pod["spec"])}:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                                 "ContainerCreating")
    params["container"] = container
    url = agent_url(registry.caches[NODES].get("", node_name), f"/containerLogs/{namespace}/{name}/{container}")
    if url is None:
        raise errors.ApiError(503, "ServiceUnavailable", f'no node agent serves logs for node "{node_name}"')
    try:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        async with session, session.get(url, params=params) as upstream:
            resp = web.StreamResponse(status=upstream.status,
                                      headers={"Content-Type": upstream.headers.get("Content-Type", "text/plain")})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp
    except aiohttp.ClientError as exc:
        raise errors.ApiError(503, "ServiceUnavailable", f"the node agent on {node_name} is unreachable: {exc}") \
            from None
