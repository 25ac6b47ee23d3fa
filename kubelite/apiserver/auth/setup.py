"""Wiring an API server's authentication from its `AuthConfig`: the authenticator chain, the service-account
token signer/authenticator, and the ServiceAccount admission plugin. Kept here so app.py only calls it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kubelite.apiserver.auth import authenticator
from kubelite.apiserver.auth.admission import ServiceAccountAdmission
from kubelite.apiserver.auth.bootstraptoken import CLUSTER_INFO_PATH, BootstrapTokens
from kubelite.apiserver.auth.config import ADMIN_USER, AuthConfig
from kubelite.apiserver.auth.serviceaccount import ServiceAccountTokens
from kubelite.apiserver.auth.tokenfile import StaticTokens
from kubelite.apiserver.auth.x509 import ClientCertificates
from kubelite.apiserver.registry.base import Lookup
from kubelite.clock import Clock


@dataclass(frozen=True)
class Authentication:
    chain: authenticator.Union | None  # None: no authentication at all (--insecure)
    service_account_tokens: ServiceAccountTokens | None
    admission: ServiceAccountAdmission | None


def build(config: AuthConfig, admin_tokens: Collection[str], lookup: Lookup, clock: Clock) -> Authentication:
    """x509 client certificates, then bearer tokens (admin and token file, then service-account JWTs), then
    anonymous if enabled (or, with bootstrap tokens, for cluster-info only), as kube-apiserver's union."""
    sa = config.service_accounts
    tokens = admission = None
    if sa is not None:
        tokens = ServiceAccountTokens(sa.issuer, sa.signing_key, sa.public_keys, sa.audiences, lookup, clock,
                                      sa.extend_expiration)
        admission = ServiceAccountAdmission(sa.mount_tokens) if sa.admission else None
    static = {**{t: ADMIN_USER for t in admin_tokens}, **config.static_tokens}
    chain: list[authenticator.Authenticator] = [ClientCertificates(clock, config.client_authorities)] \
        if config.client_certificates else []
    token_authenticators: list[authenticator.TokenAuthenticator] = [StaticTokens(static)] if static else []
    if tokens is not None:
        token_authenticators.append(tokens)
    if config.bootstrap_tokens:
        token_authenticators.append(BootstrapTokens(lookup, clock))
    if token_authenticators:
        chain.append(authenticator.BearerToken(token_authenticators))
    # Service-account tokens alone do not turn authentication on: without an admin token or any other
    # authenticator the server is --insecure (plain HTTP on loopback), where every request is unsecured.
    enabled = bool(static) or config.client_certificates or config.anonymous
    anonymous_paths = frozenset({CLUSTER_INFO_PATH}) if config.bootstrap_tokens else frozenset()
    union = authenticator.Union(chain, config.anonymous, anonymous_paths)
    return Authentication(union if enabled else None, tokens, admission)
