"""Token file parsing, x509 CN/O mapping, the union chain and the Forbidden message, as upstream's tests."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubelite.apiserver.auth.authenticator import AuthRequest, BearerToken, InvalidCredential, Union
from kubelite.apiserver.auth.authorizer import forbidden
from kubelite.apiserver.auth.requestinfo import RequestAttributes, new_request_info
from kubelite.apiserver.auth.tokenfile import StaticTokens, TokenFileError, parse_token_file
from kubelite.apiserver.auth.user import UserInfo
from kubelite.apiserver.auth.x509 import ClientCertificates, user_from_certificate
from kubelite.clock import FakeClock

# plugin/pkg/authenticator/token/tokenfile/tokenfile_test.go TestTokenFile
TOKEN_FILE = '''token1,user1,uid1
token2,user2,uid2
token3,user3,uid3,"group1,group2"
token4,user4,uid4,"group2"
token5,user5,uid5,group5
token6,user6,uid6,group5,otherdata
token7,user7,uid7,"group1,group2",otherdata
'''
TOKEN_FILE_CASES = {
    "plain": ("token1", UserInfo("user1", "uid1")),
    "second line": ("token2", UserInfo("user2", "uid2")),
    "quoted groups": ("token3", UserInfo("user3", "uid3", ("group1", "group2"))),
    "one quoted group": ("token4", UserInfo("user4", "uid4", ("group2",))),
    "unquoted group": ("token5", UserInfo("user5", "uid5", ("group5",))),
    "extra columns ignored": ("token6", UserInfo("user6", "uid6", ("group5",))),
    "quoted groups and extra columns": ("token7", UserInfo("user7", "uid7", ("group1", "group2"))),
    "unknown token": ("token8", None),
}


@pytest.mark.parametrize(("token", "user"), TOKEN_FILE_CASES.values(), ids=TOKEN_FILE_CASES.keys())
def test_token_file(token: str, user: UserInfo | None) -> None:
    assert StaticTokens(parse_token_file(TOKEN_FILE, "tokens.csv")).authenticate_token(token) == user


# TestBadTokenFile, TestInsufficientColumnsTokenFile
BAD_TOKEN_FILES = {
    "a line of two columns": "token1,user1,uid1\ntoken2,user2,uid2\ntoken3,user3\ntoken4\n",
    "insufficient columns": "token4\n",
}


@pytest.mark.parametrize("text", BAD_TOKEN_FILES.values(), ids=BAD_TOKEN_FILES.keys())
def test_bad_token_file(text: str) -> None:
    with pytest.raises(TokenFileError, match=r"token file 'tokens.csv' must have at least 3 columns"):
        parse_token_file(text, "tokens.csv")


def test_token_file_skips_empty_tokens_and_keeps_the_last_duplicate() -> None:
    tokens = parse_token_file(",user0,uid0\n\nt,first,1\nt,second,2\n", "tokens.csv")
    assert tokens == {"t": UserInfo("second", "2")}


NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def _certificate(*attributes: x509.NameAttribute[str], start: dt.datetime = NOW, end: dt.datetime = NOW + DAY,
                 issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None, ca: bool = False,
                 ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate for `attributes` valid from `start` to `end`, self-signed or signed by `issuer`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(list(attributes))
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (name, key)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    return builder.sign(signing_key, hashes.SHA256()), key


CN, ORG = NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME
# x509_test.go TestX509 (CommonNameUserConversion): CN is the user, each O a group; no CN, no user.
X509_CASES = {
    "cn only": ([x509.NameAttribute(CN, "alice")], UserInfo("alice")),
    "cn and one organization": ([x509.NameAttribute(ORG, "devs"), x509.NameAttribute(CN, "alice")],
                                UserInfo("alice", groups=("devs",))),
    "several organizations in order": ([x509.NameAttribute(ORG, "system:nodes"), x509.NameAttribute(ORG, "b"),
                                        x509.NameAttribute(CN, "system:node:n1")],
                                       UserInfo("system:node:n1", groups=("system:nodes", "b"))),
    "no common name": ([x509.NameAttribute(ORG, "devs")], None),
}


@pytest.mark.parametrize(("attributes", "user"), X509_CASES.values(), ids=X509_CASES.keys())
def test_x509_user_conversion(attributes: list[x509.NameAttribute[str]], user: UserInfo | None) -> None:
    cert, _ = _certificate(*attributes)
    assert user_from_certificate(cert) == user
    der = cert.public_bytes(serialization.Encoding.DER)
    assert ClientCertificates(FakeClock(NOW.timestamp())).authenticate(AuthRequest({}, der)) == user


@dataclass(frozen=True)
class ValidityCase:
    name: str
    leaf: tuple[dt.datetime, dt.datetime]  # not before, not after
    authority: tuple[dt.datetime, dt.datetime]
    error: str | None  # what InvalidCredential says after "...expired or is not yet valid: "; None: authenticated


EARLIER, LATER = NOW - DAY, NOW + DAY
# x509_test.go TestX509's "expired" and "not yet valid" cases (Verify with CurrentTime from the authenticator's
# clock) and the CA's own period, which Go's chain verification checks too.
VALIDITY_CASES = [
    ValidityCase("valid leaf from a valid CA", (EARLIER, LATER), (EARLIER, LATER), None),
    ValidityCase("valid on its last second", (EARLIER, NOW), (EARLIER, LATER), None),
    ValidityCase("expired", (EARLIER - DAY, EARLIER), (EARLIER - DAY, LATER),
                 "current time 2026-11-27T12:00:00Z is after 2026-11-26T12:00:00Z"),
    ValidityCase("not yet valid", (LATER, LATER + DAY), (EARLIER, LATER + DAY),
                 "current time 2026-11-27T12:00:00Z is before 2026-11-28T12:00:00Z"),
    ValidityCase("the issuing CA expired", (EARLIER, LATER), (EARLIER - DAY, EARLIER),
                 "current time 2026-11-27T12:00:00Z is after 2026-11-26T12:00:00Z"),
]


EXPIRED = "current time 2026-11-27T12:00:00Z is after 2026-11-26T12:00:00Z"
VALID, OLD = (EARLIER, LATER), (EARLIER - DAY, EARLIER)
# Chains through the bundle (Go's Verify checks every certificate of the chain it builds): (name, the bundle's
# CAs as (subject, period, signed by: index of an earlier CA or None), index of the CA that signs the leaf,
# error or None).
CHAIN_CASES = [
    ("an intermediate in the bundle expired", [("root", VALID, None), ("intermediate", OLD, 0)], 1, EXPIRED),
    ("the root above a valid intermediate expired", [("root", OLD, None), ("intermediate", VALID, 0)], 1, EXPIRED),
    ("valid intermediate and root", [("root", VALID, None), ("intermediate", VALID, 0)], 1, None),
    ("a CA being rotated, signed by the new one", [("ca", OLD, None), ("ca", VALID, None)], 1, None),
    ("a CA being rotated, signed by the new one, listed first", [("ca", VALID, None), ("ca", OLD, None)], 0, None),
    ("a CA being rotated, signed by the expired one", [("ca", VALID, None), ("ca", OLD, None)], 1, EXPIRED),
]


@pytest.mark.parametrize(("cas", "signer", "error"), [c[1:] for c in CHAIN_CASES], ids=[c[0] for c in CHAIN_CASES])
def test_x509_validity_of_the_chain(cas: list[tuple[str, tuple[dt.datetime, dt.datetime], int | None]], signer: int,
                                    error: str | None) -> None:
    bundle: list[tuple[x509.Certificate, ec.EllipticCurvePrivateKey]] = []
    for subject, (start, end), parent in cas:
        bundle.append(_certificate(x509.NameAttribute(CN, subject), start=start, end=end,
                                   issuer=bundle[parent] if parent is not None else None, ca=True))
    leaf, _ = _certificate(x509.NameAttribute(CN, "alice"), start=EARLIER, end=LATER, issuer=bundle[signer])
    authenticator = ClientCertificates(FakeClock(NOW.timestamp()), [c for c, _ in bundle])
    request = AuthRequest({}, leaf.public_bytes(serialization.Encoding.DER))
    if error is None:
        assert authenticator.authenticate(request) == UserInfo("alice")
    else:
        with pytest.raises(InvalidCredential, match=re.escape(error)):
            authenticator.authenticate(request)


@pytest.mark.parametrize("case", VALIDITY_CASES, ids=lambda c: c.name)
def test_x509_validity_period(case: ValidityCase) -> None:
    authority = _certificate(x509.NameAttribute(CN, "ca"), start=case.authority[0], end=case.authority[1])
    leaf, _ = _certificate(x509.NameAttribute(CN, "alice"), start=case.leaf[0], end=case.leaf[1], issuer=authority)
    authenticator = ClientCertificates(FakeClock(NOW.timestamp()), [authority[0]])
    request = AuthRequest({}, leaf.public_bytes(serialization.Encoding.DER))
    if case.error is None:
        assert authenticator.authenticate(request) == UserInfo("alice")
    else:
        with pytest.raises(InvalidCredential, match=re.escape(
                f"certificate has expired or is not yet valid: {case.error}")):
            authenticator.authenticate(request)


@dataclass(frozen=True)
class UnionCase:
    name: str
    headers: dict[str, str]
    anonymous: bool
    expected: str | None  # user name; None: 401


ADMIN = StaticTokens({"good": UserInfo("admin", groups=("system:masters",))})
UNION_CASES = [
    UnionCase("valid token, system:authenticated added", {"Authorization": "Bearer good"}, False, "admin"),
    UnionCase("scheme is case-insensitive", {"Authorization": "bearer good"}, False, "admin"),
    UnionCase("no credentials, anonymous off: 401", {}, False, None),
    UnionCase("no credentials, anonymous on", {}, True, "system:anonymous"),
    UnionCase("bad token is a 401 even with anonymous on", {"Authorization": "Bearer bad"}, True, None),
    UnionCase("basic auth is no bearer token", {"Authorization": "Basic Zm9vOmJhcg=="}, False, None),
    UnionCase("empty bearer token", {"Authorization": "Bearer "}, True, "system:anonymous"),
]


@pytest.mark.parametrize("case", UNION_CASES, ids=lambda c: c.name)
def test_union(case: UnionCase) -> None:
    user = Union([BearerToken([ADMIN])], case.anonymous).authenticate(AuthRequest(case.headers))
    assert (user.name if user else None) == case.expected
    if user is not None and case.expected == "admin":
        assert user.groups == ("system:masters", "system:authenticated")
    if user is not None and case.expected == "system:anonymous":
        assert user.groups == ("system:unauthenticated",)


class _Refuses:
    def authenticate_token(self, token: str) -> UserInfo | None:
        raise InvalidCredential("not this one")


def test_a_later_token_authenticator_may_accept_what_an_earlier_refused() -> None:
    user = Union([BearerToken([_Refuses(), ADMIN])]).authenticate(AuthRequest({"Authorization": "Bearer good"}))
    assert user is not None and user.name == "admin"


# responsewriters/errors_test.go TestForbidden
FORBIDDEN_CASES = [
    ("GET", "/api/v1/namespaces/ns/pods", 'pods is forbidden: User "u" cannot list resource "pods" in API group "" in '
                                          'the namespace "ns"'),
    ("GET", "/api/v1/namespaces/ns/pods/p/log", 'pods "p" is forbidden: User "u" cannot get resource "pods/log" in '
                                                'API group "" in the namespace "ns"'),
    ("GET", "/apis/apps/v1/deployments", 'deployments.apps is forbidden: User "u" cannot list resource "deployments" '
                                         'in API group "apps" at the cluster scope'),
    ("GET", "/healthz/ping", 'forbidden: User "u" cannot get path "/healthz/ping"'),
]


@pytest.mark.parametrize(("method", "path", "message"), FORBIDDEN_CASES, ids=[c[1] for c in FORBIDDEN_CASES])
def test_forbidden_message(method: str, path: str, message: str) -> None:
    err = forbidden(RequestAttributes(UserInfo("u"), new_request_info(method, path, {})), "")
    assert (err.code, err.reason, err.message) == (403, "Forbidden", message)
    err = forbidden(RequestAttributes(UserInfo("u"), new_request_info(method, path, {})), "no RBAC policy matched")
    assert re.fullmatch(re.escape(message) + ": no RBAC policy matched", err.message)
