"""`POST …/serviceaccounts/NAME/token`: TokenRequest, as pkg/registry/core/serviceaccount/storage/token.go.

Defaults and checks as upstream: expirationSeconds defaults to 3600 and must be at least 600
(and at most 2^32); audiences default to the API audiences; a bound Pod must exist, run as this
service account and match the reference's uid; a bound Node or Secret must exist; any other kind is a 400.
"""

from __future__ import annotations

from typing import Any

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.apiserver import typecheck
from kubelite.apiserver.auth.node import admit_token_request
from kubelite.apiserver.auth.serviceaccount import Binding, ServiceAccountTokens
from kubelite.apiserver.registry.base import Obj
from kubelite.apiserver.registry.config import SECRETS
from kubelite.apiserver.registry.core import NODES
from kubelite.apiserver.registry.pods import PODS
from kubelite.apiserver.registry.serviceaccounts import SERVICE_ACCOUNTS
from kubelite.apiserver.rest import Registry
from kubelite.clock import rfc3339

GROUP_VERSION = "authentication.k8s.io/v1"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600  # validation.MinTokenAgeSec
MAX_EXPIRATION = 1 << 32


def _validate(spec: Obj) -> list[Cause]:
    seconds = spec["expirationSeconds"]
    path = "spec.expirationSeconds"
    if seconds < MIN_EXPIRATION:
        return [Cause("FieldValueInvalid", f"Invalid value: {seconds}: may not specify a duration less than 10 "
                                           "minutes", path)]
    if seconds > MAX_EXPIRATION:
        return [Cause("FieldValueInvalid", f"Invalid value: {seconds}: may not specify a duration larger than 2^32 "
                                           "seconds", path)]
    return []


def _bind(registry: Registry, namespace: str, sa_name: str, ref: Obj) -> Binding:
    """Resolve boundObjectRef to the live object, with upstream's refusals."""
    api_version, kind, name = ref.get("apiVersion") or "", ref.get("kind") or "", ref.get("name") or ""
    group = api_version.split("/")[0] if "/" in api_version else ""
    uid = ref.get("uid") or ""
    binding: Binding
    if group == "" and kind == "Pod":
        pod = registry.current(PODS, namespace, name)
        if pod["spec"].get("serviceAccountName") != sa_name:
            raise errors.bad_request(f'cannot bind token for serviceaccount "{sa_name}" to pod running with '
                                     "different serviceaccount name.")
        node_name = pod["spec"].get("nodeName")
        node = registry.get("nodes", "", node_name) if node_name else None
        binding, obj = Binding(pod=pod, node=node), pod
    elif group == "" and kind == "Node":
        obj = registry.current(NODES, "", name)
        binding = Binding(node=obj)
    elif group == "" and kind == "Secret":
        obj = registry.current(SECRETS, namespace, name)
        binding = Binding(secret=obj)
    else:
        gvk = f"{api_version if '/' in api_version else '/' + api_version}, Kind={kind}"
        raise errors.bad_request(f"cannot bind token to object of type {gvk}")
    if uid and uid != obj["metadata"]["uid"]:
        raise errors.conflict(kind, name, f"the UID in the bound object reference ({uid}) does not match the UID in "
                                          "record. The object might have been deleted and then recreated")
    return binding


def create_token(registry: Registry, tokens: ServiceAccountTokens, namespace: str, name: str, body: Any,
                 node_restriction: bool = False) -> Obj:
    """The TokenRequest answered; with `node_restriction`, NodeRestriction admits a node's request first (after
    decoding, before the service account is looked up, as admission runs before the REST create)."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a TokenRequest")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind and kind != "TokenRequest") or (api_version and api_version != GROUP_VERSION):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type TokenRequest): {api_version}, "
                                 f"Kind={kind}")
    mismatch = typecheck.check(body, "AuthenticationV1TokenRequest")
    if mismatch is not None:
        raise errors.cannot_decode("TokenRequest", "v1", Cause("FieldValueInvalid", mismatch.error, mismatch.path))
    if node_restriction:
        admit_token_request(namespace, name, body.get("spec") or {}, registry)
    sa = registry.current(SERVICE_ACCOUNTS, namespace, name)
    spec: Obj = dict(body.get("spec") or {})
    spec.setdefault("expirationSeconds", DEFAULT_EXPIRATION)
    if spec["expirationSeconds"] is None:
        spec["expirationSeconds"] = DEFAULT_EXPIRATION
    if not spec.get("audiences"):
        spec["audiences"] = list(tokens.api_audiences)
    causes = _validate(spec)
    if causes:
        raise errors.invalid("TokenRequest", "", causes, "authentication.k8s.io")
    ref = spec.get("boundObjectRef")
    binding = _bind(registry, namespace, name, ref) if ref else Binding()
    issued = tokens.issue(sa, spec["audiences"], spec["expirationSeconds"], binding)
    meta = {**(body.get("metadata") or {}), "name": name, "namespace": namespace,
            "creationTimestamp": rfc3339(issued.issued_at)}
    # As upstream, the status reports the requested lifetime even when the token's exp was extended, so kubelet's
    # token manager (and the agent's) refresh it at 80% of what was asked, never relying on the extension.
    expires = issued.issued_at + spec["expirationSeconds"]
    return {"kind": "TokenRequest", "apiVersion": GROUP_VERSION, "metadata": meta, "spec": spec,
            "status": {"token": issued.token, "expirationTimestamp": rfc3339(expires)}}
