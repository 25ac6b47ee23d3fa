"""Service-account issuer discovery: the OIDC discovery document and the JWK set of the token-verifying keys.

As kube-apiserver (pkg/serviceaccount/openidmetadata.go, pkg/routes/openidmetadata.go): an external relying
party (a cloud's workload-identity federation, Vault's JWT auth, any OIDC library) that trusts the issuer
fetches `/.well-known/openid-configuration`, follows its `jwks_uri` to `/openid/v1/jwks`, and verifies
service-account tokens offline with those keys, without calling TokenReview. Both documents are rendered once
from the configured keys (kubelite's keys are static, as upstream's file-based ones: no key-change listener).
Who may read them is RBAC's business: the `system:service-account-issuer-discovery` ClusterRole, bound by
default to every service account (bootstrappolicy).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubelite.apiserver.auth.jwt import PublicKey, b64url, key_id

log = logging.getLogger("kubelite.apiserver.auth")

OPENID_CONFIG_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
# Upstream's static key getter answers GetCacheAgeMaxSeconds with an hour; it overrides the global
# `no-cache, private` for these two documents, which are the same for everyone.
CACHE_CONTROL = "public, max-age=3600"
MIME_JSON = "application/json"
MIME_JWKS = "application/jwk-set+json"  # RFC 7517 section 8.5.1
# algorithmFromPublicKey: the JWS algorithm a verifier must use with an EC key follows from its curve.
_EC_ALGORITHMS = {"secp256r1": ("ES256", "P-256"), "secp384r1": ("ES384", "P-384"), "secp521r1": ("ES512", "P-521")}


class MetadataError(ValueError):
    """Inputs from which upstream builds no discovery documents (it then logs this and serves neither)."""


@dataclass(frozen=True)
class OpenIDMetadata:
    """The two pre-rendered documents, byte for byte what upstream's json.Marshal produces for the same keys."""

    config_json: bytes
    keyset_json: bytes

    def response(self, method: str, path: str) -> web.Response | None:
        """The document served at `path` (without a trailing slash), with upstream's headers; None for other paths.
        Another method than GET is go-restful's plain-text 405, as these routes are GET only upstream."""
        if path == OPENID_CONFIG_PATH:
            body, mime = self.config_json, MIME_JSON
        elif path == JWKS_PATH:
            body, mime = self.keyset_json, MIME_JWKS
        else:
            return None
        if method != "GET":
            return web.Response(status=405, text="405: Method Not Allowed")
        resp = web.Response(body=body, headers={"Cache-Control": CACHE_CONTROL})
        resp.content_type = mime  # no charset parameter: upstream's Content-Type is exactly the media type
        return resp


def _unsigned(value: int, size: int = 0) -> str:
    """A JWK integer: big-endian, unpadded base64url; `size` pads EC coordinates to the curve's length as go-jose."""
    return b64url(value.to_bytes(max(size, (value.bit_length() + 7) // 8), "big"))


def jwk(key: PublicKey) -> dict[str, Any]:
    """The public JWK of `key` in go-jose's member order (use, kty, kid, [crv,] alg, ...), `kid` being the tokens'
    header kid (keyIDFromPublicKey)."""
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        return {"use": "sig", "kty": "RSA", "kid": key_id(key), "alg": "RS256",
                "n": _unsigned(numbers.n), "e": _unsigned(numbers.e)}
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in _EC_ALGORITHMS:
        raise MetadataError("unknown public key type, must be an RSA key or an EC key on P-256, P-384 or P-521")
    alg, crv = _EC_ALGORITHMS[key.curve.name]
    point = key.public_numbers()
    size = (key.curve.key_size + 7) // 8
    return {"use": "sig", "kty": "EC", "kid": key_id(key), "crv": crv, "alg": alg,
            "x": _unsigned(point.x, size), "y": _unsigned(point.y, size)}


def _https(url: str, what: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise MetadataError(f"{what} is not a valid URL: {exc}") from None
    if parts.scheme != "https":
        raise MetadataError(f"{what} must use https scheme, got: {url}")


def _default_jwks_uri(external_address: str) -> str:
    """https://ADDRESS/openid/v1/jwks, checked to parse back to the same host and path (an address that itself
    has a scheme does not)."""
    msg = f"attempted to build jwks_uri from external address {external_address}, but could not construct a valid URL"
    if not external_address:
        raise MetadataError(f"{msg}. Error: empty address")
    uri = f"https://{external_address}{JWKS_PATH}"
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise MetadataError(f"{msg}. Error: {exc}") from None
    if parts.netloc != external_address or parts.path != JWKS_PATH:
        raise MetadataError(f"{msg}. Error: got {parts.geturl()}, expected {uri}")
    return uri


def new_openid_metadata(issuer: str, jwks_uri: str, external_address: str,
                        keys: list[PublicKey]) -> OpenIDMetadata:
    """NewOpenIDMetadataProvider's validation and rendering: the issuer must be an https URL without query or
    fragment (the OIDC discovery spec's requirement, stricter than --service-account-issuer's own check), the
    jwks_uri `--service-account-jwks-uri` (https) or else built from the server's external address."""
    if not issuer:
        raise MetadataError("empty issuer URL")
    if not jwks_uri and not external_address:
        raise MetadataError("either the JWKS URI or the default external address, or both, must be set")
    _https(issuer, "issuer URL")
    iss = urlsplit(issuer)
    if iss.query:
        raise MetadataError(f"issuer URL may not include a query, got: {issuer}")
    if iss.fragment:
        raise MetadataError(f"issuer URL may not include a fragment, got: {issuer}")
    if jwks_uri:
        _https(jwks_uri, "jwksURI")
    else:
        jwks_uri = _default_jwks_uri(external_address)
    if not keys:
        raise MetadataError("no keys provided for validating keyset")
    jwks = [jwk(k) for k in keys]
    config = {"issuer": issuer, "jwks_uri": jwks_uri,
              "response_types_supported": ["id_token"],  # Kubernetes only produces ID tokens
              "subject_types_supported": ["public"],
              "id_token_signing_alg_values_supported": sorted({k["alg"] for k in jwks})}
    return OpenIDMetadata(orjson.dumps(config), orjson.dumps({"keys": jwks}))


def join_host_port(server_address: str) -> str:
    """net.JoinHostPort of the server's "host:port" (an IPv6 host gets its brackets): upstream's ExternalAddress,
    the advertised address and the secure port."""
    host, sep, port = server_address.rpartition(":")
    if sep and ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return server_address


def discovery(issuer: str, jwks_uri: str, server_address: str, keys: list[PublicKey]) -> OpenIDMetadata | None:
    """The documents to serve, or None (logged) when upstream would install no endpoints: its start-up logs the
    error and carries on without them, rather than refusing flags it accepted before discovery existed."""
    try:
        return new_openid_metadata(issuer, jwks_uri, join_host_port(server_address), keys)
    except MetadataError as exc:
        log.error("Could not construct pre-rendered responses for ServiceAccountIssuerDiscovery endpoints. "
                  "Endpoints will not be enabled. Error: %s", exc)
        return None
