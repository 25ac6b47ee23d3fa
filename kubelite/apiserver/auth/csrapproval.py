"""`certificatesigningrequests/approval` (the approval REST of pkg/registry/certificates): the Approved or
Denied condition, and nothing else, changes; a decision once made stays; the requester must also be allowed
to `approve` the request's signer (resource `signers` of certificates.k8s.io, named by the signer or
`domain/*`), as the CertificateApproval admission plugin checks."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.apiserver.auth.authorizer import Authorizer, Decision
from kubelite.apiserver.auth.requestinfo import RequestAttributes, RequestInfo
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.handlers import respond
from kubelite.apiserver.registry.certificates import CERTIFICATE_SIGNING_REQUESTS, DECISIONS, decisions
from kubelite.apiserver.request import Target, decode_body, media_type, read_body
from kubelite.apiserver.rest import Registry

Obj = dict[str, Any]
CSR = CERTIFICATE_SIGNING_REQUESTS


def handles(target: Target) -> bool:
    return target.resource is CSR and target.subresource == "approval"


def may_approve(authorizer: Authorizer, user: UserInfo, signer: str) -> bool:
    domain = signer.split("/", 1)[0]
    for name in (signer, f"{domain}/*"):
        info = RequestInfo(True, "", "approve", "apis", CSR.group, "v1", "", "signers", "", name)
        if authorizer.authorize(RequestAttributes(user, info))[0] is Decision.ALLOW:
            return True
    return False


def approved_conditions(body: Obj, cur: Obj, now: str) -> list[Obj]:
    """The stored conditions with the body's decisions; 422 for two decisions or a decision undone."""
    wanted = decisions(body)
    types = {c.get("type") for c in wanted}
    causes: list[Cause] = []
    if types == set(DECISIONS):
        causes.append(Cause("FieldValueInvalid", 'Invalid value: "Approved": Approved and Denied conditions are '
                                                 "mutually exclusive", "status.conditions"))
    previous = decisions(cur)
    for old in previous:
        if old.get("type") not in types:
            causes.append(Cause("FieldValueForbidden", f"Forbidden: updates may not remove a condition of type "
                                                       f"\"{old.get('type')}\"", "status.conditions"))
    if causes:
        raise errors.invalid(CSR.kind, cur["metadata"]["name"], causes, CSR.group)
    kept = {c["type"]: c for c in previous}
    merged = []
    for c in wanted:
        if c["type"] in kept:
            merged.append(kept[c["type"]])
        else:
            merged.append({"status": "True", **c, "lastUpdateTime": c.get("lastUpdateTime") or now,
                           "lastTransitionTime": c.get("lastTransitionTime") or now})
    others = [c for c in (cur.get("status") or {}).get("conditions") or [] if c.get("type") not in DECISIONS]
    return merged + others


async def serve(request: web.Request, target: Target, user: UserInfo, registry: Registry,
                authorizer: Authorizer) -> web.StreamResponse:
    if request.method == "GET":
        return respond(registry.current(CSR, "", target.name))
    if request.method != "PUT":
        raise errors.method_not_allowed(request.method, "certificatesigningrequests/approval")
    body = decode_body(await read_body(request), media_type(request))
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a CertificateSigningRequest")
    cur = registry.current(CSR, "", target.name)
    signer = (cur.get("spec") or {}).get("signerName", "")
    if not may_approve(authorizer, user, signer):
        raise errors.forbidden(f'certificatesigningrequests.certificates.k8s.io "{target.name}" is forbidden: user '
                               f'not permitted to approve requests with signerName "{signer}"')

    def mutate(obj: Obj) -> Obj:
        status = obj.setdefault("status", {})
        status["conditions"] = approved_conditions(body, obj, registry.now())
        return obj

    return respond(await registry.guaranteed_update(CSR, "", target.name, mutate))
