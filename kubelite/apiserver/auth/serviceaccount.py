"""Service-account tokens: issuing bound JWTs (TokenRequest) and authenticating them.

Claims and checks follow pkg/serviceaccount (claims.go, jwt.go): iss, sub
`system:serviceaccount:NS:NAME`, aud, exp, iat, nbf, jti and the private `kubernetes.io` claim
naming the namespace, the service account and the bound pod (and its node), node or secret.
A token authenticates only while it is unexpired (60 s leeway), meant for one of the API
audiences, and its service account and bound object still exist with the uids it names, so
deleting a pod invalidates the tokens bound to it. Legacy secret-based tokens (issuer
`kubernetes/serviceaccount`) are not issued nor accepted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubelite.api.validation import is_dns1123_label, is_dns1123_subdomain
from kubelite.apiserver.auth import jwt
from kubelite.apiserver.auth.authenticator import InvalidCredential
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.registry.base import Lookup, Obj
from kubelite.clock import Clock, parse_rfc3339

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS = "system:serviceaccounts"
WARN_ONLY_BOUND_TOKEN_EXPIRATION = 3607  # the projected volume's expirationSeconds: extended, with a warnafter
EXPIRATION_EXTENSION = 365 * 24 * 3600
LEEWAY = 60  # go-jose's DefaultLeeway, and how long a deleted bound object's tokens still work
POD_NAME, POD_UID = "authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"
NODE_NAME, NODE_UID = "authentication.kubernetes.io/node-name", "authentication.kubernetes.io/node-uid"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


def username(namespace: str, name: str) -> str:
    return f"{PREFIX}{namespace}:{name}"


def split_username(name: str) -> tuple[str, str] | None:
    """serviceaccount.SplitUsername: `system:serviceaccount:NS:NAME`'s namespace (a DNS-1123 label) and name (a
    DNS-1123 subdomain); None for any other user name."""
    if not name.startswith(PREFIX):
        return None
    parts = name[len(PREFIX):].split(":")
    if len(parts) != 2 or is_dns1123_label(parts[0]) or is_dns1123_subdomain(parts[1]):
        return None
    return parts[0], parts[1]


def groups(namespace: str) -> tuple[str, str]:
    return ALL_SERVICE_ACCOUNTS, f"{ALL_SERVICE_ACCOUNTS}:{namespace}"


def _ref(obj: Obj) -> dict[str, str]:
    return {"name": obj["metadata"]["name"], "uid": obj["metadata"].get("uid", "")}


@dataclass(frozen=True)
class Binding:
    """What a token is bound to (TokenRequest's boundObjectRef, resolved): a pod (and its node), a node or a
    secret."""

    pod: Obj | None = None
    node: Obj | None = None
    secret: Obj | None = None


@dataclass(frozen=True)
class Issued:
    token: str
    issued_at: int  # unix seconds
    expiration: int  # unix seconds: the token's exp claim (a year on for an extended projected-volume token)


@dataclass(frozen=True)
class ServiceAccountTokens:
    """The signer and the authenticator of bound service-account tokens (one issuer, one key set)."""

    issuer: str
    signing_key: jwt.PrivateKey | None  # None: verify only (the token subresource is not served)
    public_keys: Sequence[jwt.PublicKey]
    api_audiences: tuple[str, ...]
    lookup: Lookup
    clock: Clock
    extend_expiration: bool = True  # --service-account-extend-token-expiration

    # --- issuing (TokenRequest) ---------------------------------------------------------------------

    def issue(self, sa: Obj, audiences: Sequence[str], expiration_seconds: int, binding: Binding) -> Issued:
        assert self.signing_key is not None, "issue() needs a signing key"
        now = int(self.clock.now())
        expires = expiration_seconds
        private: dict[str, Any] = {"namespace": sa["metadata"]["namespace"], "serviceaccount": _ref(sa)}
        if binding.node is not None:
            private["node"] = _ref(binding.node)
        if binding.pod is not None:
            private["pod"] = _ref(binding.pod)
            if (self.extend_expiration and expiration_seconds == WARN_ONLY_BOUND_TOKEN_EXPIRATION
                    and set(audiences) <= set(self.api_audiences)):
                private["warnafter"] = now + expiration_seconds
                expires = EXPIRATION_EXTENSION
        if binding.secret is not None:
            private["secret"] = _ref(binding.secret)
        claims = {"aud": list(audiences), "exp": now + expires, "iat": now, "iss": self.issuer,
                  "jti": str(uuid.uuid4()), "kubernetes.io": private, "nbf": now,
                  "sub": username(sa["metadata"]["namespace"], sa["metadata"]["name"])}
        return Issued(jwt.sign(claims, self.signing_key), now, now + expires)

    # --- authenticating ------------------------------------------------------------------------------

    def authenticate_token(self, token: str) -> UserInfo | None:
        parsed = jwt.parse(token)
        if parsed is None or parsed.claims.get("iss") != self.issuer:
            return None  # not a token of ours: another authenticator's
        claims = jwt.verify(parsed, list(self.public_keys))
        self._check_audience(claims)
        self._check_times(claims)
        return self._user(claims)

    def _check_audience(self, claims: dict[str, Any]) -> None:
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not set(audiences) & set(self.api_audiences):
            raise InvalidCredential(f"token audiences {audiences} is invalid for the target audiences "
                                    f"{list(self.api_audiences)}")

    def _check_times(self, claims: dict[str, Any]) -> None:
        now = self.clock.now()
        exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
        if not isinstance(exp, (int, float)) or now - LEEWAY > exp:
            raise InvalidCredential("service account token has expired")
        if isinstance(nbf, (int, float)) and now + LEEWAY < nbf:
            raise InvalidCredential("service account token is not valid yet")
        if isinstance(iat, (int, float)) and now + LEEWAY < iat:
            raise InvalidCredential("service account token is issued in the future")

    def _live(self, resource: str, namespace: str, ref: Any, what: str) -> Obj:
        """The object a claim names, if it still exists with that uid (deleted over a minute ago counts as gone)."""
        name = ref.get("name", "") if isinstance(ref, dict) else ""
        obj = self.lookup.get(resource, namespace, name) if name else None
        deleted = obj is not None and obj["metadata"].get("deletionTimestamp")
        if obj is None or (deleted and parse_rfc3339(deleted) < self.clock.now() - LEEWAY):
            raise InvalidCredential(f"{what} {namespace + '/' if namespace else ''}{name} has been deleted")
        if obj["metadata"].get("uid") != ref.get("uid"):
            raise InvalidCredential(f"{what} UID ({obj['metadata'].get('uid')}) does not match claim "
                                    f"({ref.get('uid')})")
        return obj

    def _user(self, claims: dict[str, Any]) -> UserInfo:
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict) or not isinstance(private.get("namespace"), str):
            raise InvalidCredential("service account token claims could not be validated")
        namespace = private["namespace"]
        sa = self._live("serviceaccounts", namespace, private.get("serviceaccount"), "service account")
        if claims.get("sub") != username(namespace, sa["metadata"]["name"]):
            raise InvalidCredential("service account token subject does not match its claims")
        extra: dict[str, tuple[str, ...]] = {}
        if "secret" in private:
            self._live("secrets", namespace, private["secret"], "secret")
        if "pod" in private:
            pod = self._live("pods", namespace, private["pod"], "pod")
            extra[POD_NAME], extra[POD_UID] = (pod["metadata"]["name"],), (pod["metadata"]["uid"],)
        node = private.get("node")
        if "pod" not in private and "node" in private:  # bound to the node itself: it must still exist
            self._live("nodes", "", node, "node")
        if isinstance(node, dict) and node.get("name"):
            extra[NODE_NAME] = (str(node["name"]),)
            if node.get("uid"):
                extra[NODE_UID] = (str(node["uid"]),)
        if isinstance(claims.get("jti"), str):
            extra[CREDENTIAL_ID] = (f"JTI={claims['jti']}",)
        return UserInfo(username(namespace, sa["metadata"]["name"]), sa["metadata"].get("uid", ""),
                        groups(namespace), extra)
