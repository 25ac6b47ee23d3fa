"""pods/log: proxied to the node agent that runs the pod, as kube-apiserver proxies to kubelet.

The agent's endpoint is the node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`;
the response (chunked for `follow`) is streamed through unchanged.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from kubelite.api import errors
from kubelite.apiserver.registry.core import NODES
from kubelite.apiserver.registry.pods import PODS
from kubelite.apiserver.rest import Registry

LOG_PARAMS = ("container", "follow", "previous", "tailLines", "sinceSeconds", "sinceTime", "timestamps",
              "limitBytes")


async def proxy(request: web.Request, registry: Registry, namespace: str, name: str) -> web.StreamResponse:
    pod = registry.current(PODS, namespace, name)
    containers = [c["name"] for c in pod["spec"].get("containers") or []]
    container = request.query.get("container") or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                 f"[{' '.join(containers)}]")
    node_name = pod["spec"].get("nodeName")
    if not node_name:
        raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                                 "ContainerCreating")
    node = registry.caches[NODES].get("", node_name)
    port = (((node or {}).get("status") or {}).get("daemonEndpoints") or {}).get("kubeletEndpoint", {}).get("Port")
    address = next((a["address"] for a in ((node or {}).get("status") or {}).get("addresses") or []
                    if a.get("type") == "InternalIP"), None)
    if not port or not address:
        raise errors.ApiError(503, "ServiceUnavailable", f'no node agent serves logs for node "{node_name}"')
    params = {k: request.query[k] for k in LOG_PARAMS if k in request.query}
    params["container"] = container
    url = f"http://{address}:{port}/containerLogs/{namespace}/{name}/{container}"
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
