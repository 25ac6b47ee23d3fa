"""Service-account issuer discovery, as upstream's pkg/serviceaccount/openidmetadata_test.go (case names kept):
the documents byte for byte (TestNewOpenIDMetadata, with upstream's keys and expected JSON), served over HTTP
by a real API server (TestServeConfiguration, TestServeKeys, TestURLBoundaries), and who may read them under
RBAC (the bootstrap policy's system:service-account-issuer-discovery)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubelite.apiserver.auth import jwt
from kubelite.apiserver.auth.bootstrappolicy import cluster_role_bindings, cluster_roles
from kubelite.apiserver.auth.config import AuthConfig, ServiceAccountConfig
from kubelite.apiserver.auth.openidmetadata import (
    JWKS_PATH,
    MetadataError,
    join_host_port,
    new_openid_metadata,
)
from kubelite.store.sqlite import SQLiteStore
from tests.conftest import serving

Client = TestClient  # type: ignore[type-arg]
EXAMPLE_ISSUER = "https://issuer.example.com"
ADMIN = "admin-token"

# pkg/serviceaccount/jwt_test.go's keys
RSA_PUBLIC_KEY = """-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA249XwEo9k4tM8fMxV7zx
OhcrP+WvXn917koM5Qr2ZXs4vo26e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt+ecI
zshKuv1gKIxbbLQMOuK1eA/4HALyEkFgmS/tleLJrhc65tKPMGD+pKQ/xhmzRuCG
51RoiMgbQxaCyYxGfNLpLAZK9L0Tctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJU
j7OTh/AjjCnMnkgvKT2tpKxYQ59PgDgU8Ssc7RDSmSkLxnrv+OrN80j6xrw0OjEi
B4Ycr0PqfzZcvy8efTtFQ/Jnc4Bp1zUtFXt7+QeevePtQ2EcyELXE0i63T1CujRM
WwIDAQAB
-----END PUBLIC KEY-----
"""
RSA_PRIVATE_KEY = """-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA249XwEo9k4tM8fMxV7zxOhcrP+WvXn917koM5Qr2ZXs4vo26
e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt+ecIzshKuv1gKIxbbLQMOuK1eA/4HALy
EkFgmS/tleLJrhc65tKPMGD+pKQ/xhmzRuCG51RoiMgbQxaCyYxGfNLpLAZK9L0T
ctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJUj7OTh/AjjCnMnkgvKT2tpKxYQ59P
gDgU8Ssc7RDSmSkLxnrv+OrN80j6xrw0OjEiB4Ycr0PqfzZcvy8efTtFQ/Jnc4Bp
1zUtFXt7+QeevePtQ2EcyELXE0i63T1CujRMWwIDAQABAoIBAHJx8GqyCBDNbqk7
e7/hI9iE1S10Wwol5GH2RWxqX28cYMKq+8aE2LI1vPiXO89xOgelk4DN6urX6xjK
ZBF8RRIMQy/e/O2F4+3wl+Nl4vOXV1u6iVXMsD6JRg137mqJf1Fr9elg1bsaRofL
Q7CxPoB8dhS+Qb+hj0DhlqhgA9zG345CQCAds0ZYAZe8fP7bkwrLqZpMn7Dz9WVm
++YgYYKjuE95kPuup/LtWfA9rJyE/Fws8/jGvRSpVn1XglMLSMKhLd27sE8ZUSV0
2KUzbfRGE0+AnRULRrjpYaPu0XQ2JjdNvtkjBnv27RB89W9Gklxq821eH1Y8got8
FZodjxECgYEA93pz7AQZ2xDs67d1XLCzpX84GxKzttirmyj3OIlxgzVHjEMsvw8v
sjFiBU5xEEQDosrBdSknnlJqyiq1YwWG/WDckr13d8G2RQWoySN7JVmTQfXcLoTu
YGRiiTuoEi3ab3ZqrgGrFgX7T/cHuasbYvzCvhM2b4VIR3aSxU2DTUMCgYEA4x7J
T/ErP6GkU5nKstu/mIXwNzayEO1BJvPYsy7i7EsxTm3xe/b8/6cYOz5fvJLGH5mT
Q8YvuLqBcMwZardrYcwokD55UvNLOyfADDFZ6l3WntIqbA640Ok2g1X4U8J09xIq
ZLIWK1yWbbvi4QCeN5hvWq47e8sIj5QHjIIjRwkCgYEAyNqjltxFN9zmzPDa2d24
EAvOt3pYTYBQ1t9KtqImdL0bUqV6fZ6PsWoPCgt+DBuHb+prVPGP7Bkr/uTmznU/
+AlTO+12NsYLbr2HHagkXE31DEXE7CSLa8RNjN/UKtz4Ohq7vnowJvG35FCz/mb3
FUHbtHTXa2+bGBUOTf/5Hw0CgYBxw0r9EwUhw1qnUYJ5op7OzFAtp+T7m4ul8kCa
SCL8TxGsgl+SQ34opE775dtYfoBk9a0RJqVit3D8yg71KFjOTNAIqHJm/Vyyjc+h
i9rJDSXiuczsAVfLtPVMRfS0J9QkqeG4PIfkQmVLI/CZ2ZBmsqEcX+eFs4ZfPLun
Qsxe2QKBgGuPilIbLeIBDIaPiUI0FwU8v2j8CEQBYvoQn34c95hVQsig/o5z7zlo
UsO0wlTngXKlWdOcCs1kqEhTLrstf48djDxAYAxkw40nzeJOt7q52ib/fvf4/UBy
X024wzbiw1q07jFCyfQmODzURAx1VNT7QVUMdz/N8vy47/H40AZJ
-----END RSA PRIVATE KEY-----
"""
ECDSA_PRIVATE_KEY = """-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIEZmTmUhuanLjPA2CLquXivuwBDHTt5XYwgIr/kA1LtRoAoGCCqGSM49
AwEHoUQDQgAEH6cuzP8XuD5wal6wf9M6xDljTOPLX2i8uIp/C/ASqiIGUeeKQtX0
/IR3qCXyThP/dbCiHrF3v1cuhBOHY8CLVg==
-----END EC PRIVATE KEY-----
"""
ECDSA_PUBLIC_KEY = """-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEH6cuzP8XuD5wal6wf9M6xDljTOPL
X2i8uIp/C/ASqiIGUeeKQtX0/IR3qCXyThP/dbCiHrF3v1cuhBOHY8CLVg==
-----END PUBLIC KEY-----
"""
RSA_KEY_ID = "JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU"
ECDSA_KEY_ID = "SoABiieYuNx4UdqYvZRVeuC6SihxgLrhLy9peHMHpTc"
WANT_KEYSET = (
    '{"keys":[{"use":"sig","kty":"RSA","kid":"JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU","alg":"RS256",'
    '"n":"249XwEo9k4tM8fMxV7zxOhcrP-WvXn917koM5Qr2ZXs4vo26e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt-ecIzshKuv1gKIxbbLQMOuK1'
    'eA_4HALyEkFgmS_tleLJrhc65tKPMGD-pKQ_xhmzRuCG51RoiMgbQxaCyYxGfNLpLAZK9L0Tctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJUj7'
    'OTh_AjjCnMnkgvKT2tpKxYQ59PgDgU8Ssc7RDSmSkLxnrv-OrN80j6xrw0OjEiB4Ycr0PqfzZcvy8efTtFQ_Jnc4Bp1zUtFXt7-QeevePtQ2Ec'
    'yELXE0i63T1CujRMWw","e":"AQAB"},{"use":"sig","kty":"EC","kid":"SoABiieYuNx4UdqYvZRVeuC6SihxgLrhLy9peHMHpTc",'
    '"crv":"P-256","alg":"ES256","x":"H6cuzP8XuD5wal6wf9M6xDljTOPLX2i8uIp_C_ASqiI",'
    '"y":"BlHnikLV9PyEd6gl8k4T_3Wwoh6xd79XLoQTh2PAi1Y"}]}')


def _config(issuer: str, jwks_uri: str) -> str:
    return (f'{{"issuer":"{issuer}","jwks_uri":"{jwks_uri}","response_types_supported":["id_token"],'
            '"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256","RS256"]}')


def _keys(tmp_path: Path, *pems: str) -> list[jwt.PublicKey]:
    """Keys as --service-account-key-file reads them (public keys, or private keys' public halves)."""
    path = tmp_path / "keys.pem"
    path.write_text("".join(pems))
    return jwt.load_public_keys(path)


DEFAULT_KEYS = (RSA_PUBLIC_KEY, ECDSA_PUBLIC_KEY)
JWKS = EXAMPLE_ISSUER + JWKS_PATH
NEW_OPENID_METADATA = [  # TestNewOpenIDMetadata: (name, issuer, jwks_uri, external address, keys, config or None)
    ("valid inputs", EXAMPLE_ISSUER, JWKS, "", DEFAULT_KEYS, _config(EXAMPLE_ISSUER, JWKS)),
    ("valid inputs, default JWKSURI to external address", EXAMPLE_ISSUER, "", "192.0.2.1:80", DEFAULT_KEYS,
     _config(EXAMPLE_ISSUER, "https://192.0.2.1:80/openid/v1/jwks")),
    ("valid inputs, IP addresses instead of domains", "https://192.0.2.1:80", "https://192.0.2.1:80" + JWKS_PATH, "",
     DEFAULT_KEYS, _config("https://192.0.2.1:80", "https://192.0.2.1:80/openid/v1/jwks")),
    ("response only contains public keys, even when private keys are provided", EXAMPLE_ISSUER, JWKS, "",
     (RSA_PRIVATE_KEY, ECDSA_PRIVATE_KEY), _config(EXAMPLE_ISSUER, JWKS)),
    ("issuer missing https", "http://issuer.example.com", JWKS, "", DEFAULT_KEYS, None),
    ("issuer missing scheme", "issuer.example.com", JWKS, "", DEFAULT_KEYS, None),
    ("issuer includes query", "https://issuer.example.com?foo=bar", JWKS, "", DEFAULT_KEYS, None),
    ("issuer includes fragment", "https://issuer.example.com#baz", JWKS, "", DEFAULT_KEYS, None),
    ("issuer includes query and fragment", "https://issuer.example.com?foo=bar#baz", JWKS, "", DEFAULT_KEYS, None),
    ("issuer is not a valid URL", "issuer", JWKS, "", DEFAULT_KEYS, None),
    ("jwks missing https", EXAMPLE_ISSUER, "http://issuer.example.com" + JWKS_PATH, "", DEFAULT_KEYS, None),
    ("jwks missing scheme", EXAMPLE_ISSUER, "issuer.example.com" + JWKS_PATH, "", DEFAULT_KEYS, None),
    ("jwks is not a valid URL", EXAMPLE_ISSUER, "issuer" + JWKS_PATH, "", DEFAULT_KEYS, None),
    ("external address also has a scheme", EXAMPLE_ISSUER, "", "https://192.0.2.1:80", DEFAULT_KEYS, None),
    ("missing external address and jwks", EXAMPLE_ISSUER, "", "", DEFAULT_KEYS, None),
    # kubelite: upstream's Update() refuses an empty key set the same way
    ("no keys", EXAMPLE_ISSUER, JWKS, "", (), None),
]


@pytest.mark.parametrize("name,issuer,jwks_uri,external,pems,want_config", NEW_OPENID_METADATA,
                         ids=[c[0] for c in NEW_OPENID_METADATA])
def test_new_openid_metadata(tmp_path: Path, name: str, issuer: str, jwks_uri: str, external: str,
                             pems: tuple[str, ...], want_config: str | None) -> None:
    keys = _keys(tmp_path, *pems) if pems else []
    if want_config is None:
        with pytest.raises(MetadataError):
            new_openid_metadata(issuer, jwks_uri, external, keys)
        return
    md = new_openid_metadata(issuer, jwks_uri, external, keys)
    assert md.config_json.decode() == want_config
    assert md.keyset_json.decode() == WANT_KEYSET


def test_key_ids_are_the_tokens_header_kid(tmp_path: Path) -> None:
    """Upstream's expected kids are keyIDFromPublicKey's: the same function signs kubelite's tokens' headers."""
    assert [jwt.key_id(k) for k in _keys(tmp_path, *DEFAULT_KEYS)] == [RSA_KEY_ID, ECDSA_KEY_ID]


JOIN_HOST_PORT = [  # (name, server address, external address)
    ("an IPv4 address and port stay as they are", "10.0.0.1:6443", "10.0.0.1:6443"),
    ("an IPv6 address gets brackets", "fd00::1:6443", "[fd00::1]:6443"),
    ("a bracketed IPv6 address stays as it is", "[fd00::1]:6443", "[fd00::1]:6443"),
]


@pytest.mark.parametrize("name,address,want", JOIN_HOST_PORT, ids=[c[0] for c in JOIN_HOST_PORT])
def test_join_host_port(name: str, address: str, want: str) -> None:
    assert join_host_port(address) == want


# --- over HTTP, through a real API server with RBAC ----------------------------------------------------------------

SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())


@contextlib.asynccontextmanager
async def _server(tmp_path: Path, keys: list[jwt.PublicKey], anonymous: bool = False,
                  jwks_uri: str = JWKS) -> AsyncIterator[Client]:
    accounts = ServiceAccountConfig(SIGNING_KEY, tuple(keys), EXAMPLE_ISSUER, jwks_uri=jwks_uri)
    auth = AuthConfig(service_accounts=accounts, anonymous=anonymous, authorization_modes=("RBAC",))
    async with serving(await SQLiteStore.open(tmp_path / "state.db"), frozenset({ADMIN}), auth) as client:
        yield client


async def _get(api: Client, path: str, token: str | None = ADMIN, expect: int = 200) -> tuple[Any, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = await api.get(path, headers=headers)
    body = orjson.loads(await resp.read())
    assert resp.status == expect, (path, resp.status, body)
    return body, dict(resp.headers)


async def test_serve_configuration(tmp_path: Path) -> None:
    """TestServeConfiguration."""
    async with _server(tmp_path, _keys(tmp_path, *DEFAULT_KEYS)) as api:
        got, headers = await _get(api, "/.well-known/openid-configuration")
        assert got == orjson.loads(_config(EXAMPLE_ISSUER, JWKS))
        assert headers["Content-Type"] == "application/json"
        assert headers["Cache-Control"] == "public, max-age=3600"


SERVE_KEYS = [  # TestServeKeys: (name, PEMs configured)
    ("configured public keys", DEFAULT_KEYS),
    ("only publishes public keys", (RSA_PRIVATE_KEY, ECDSA_PRIVATE_KEY)),
]


@pytest.mark.parametrize("name,pems", SERVE_KEYS, ids=[c[0] for c in SERVE_KEYS])
async def test_serve_keys(tmp_path: Path, name: str, pems: tuple[str, ...]) -> None:
    async with _server(tmp_path, _keys(tmp_path, *pems)) as api:
        got, headers = await _get(api, "/openid/v1/jwks")
        assert got == orjson.loads(WANT_KEYSET)
        assert not any("d" in k or "p" in k for k in got["keys"])  # no private member
        assert headers["Content-Type"] == "application/jwk-set+json"
        assert headers["Cache-Control"] == "public, max-age=3600"


URL_BOUNDARIES = [  # TestURLBoundaries: (name, path, served); kubelite serves a trailing slash too, as RBAC names it
    ("OIDC config path", "/.well-known/openid-configuration", True),
    ("JWKS path", "/openid/v1/jwks", True),
    ("well-known", "/.well-known", False),
    ("subpath", "/openid/v1/jwks/foo", False),
    ("query", "/openid/v1/jwks?format=yaml", True),
    ("fragment", "/openid/v1/jwks#issuer", True),
    ("trailing slash", "/openid/v1/jwks/", True),
]


async def test_url_boundaries(tmp_path: Path) -> None:
    async with _server(tmp_path, _keys(tmp_path, *DEFAULT_KEYS)) as api:
        for name, path, served in URL_BOUNDARIES:
            resp = await api.get(path, headers={"Authorization": f"Bearer {ADMIN}"})
            assert resp.status == (200 if served else 404), name
        for method in ("POST", "PUT", "DELETE"):  # the routes are GET only: go-restful's 405 to whoever may ask
            resp = await api.request(method, JWKS_PATH, headers={"Authorization": f"Bearer {ADMIN}"})
            assert (resp.status, await resp.text()) == (405, "405: Method Not Allowed"), method


async def test_jwks_uri_defaults_to_the_advertised_address(tmp_path: Path) -> None:
    """Without --service-account-jwks-uri: https://, the server's advertised address and port, the JWKS path."""
    async with _server(tmp_path, _keys(tmp_path, *DEFAULT_KEYS), jwks_uri="") as api:
        got, _ = await _get(api, "/.well-known/openid-configuration")
        assert got["jwks_uri"] == "https://127.0.0.1:6443/openid/v1/jwks"  # ApiServer's default server_address


async def test_not_served_when_upstream_would_not_install_it(tmp_path: Path) -> None:
    """An http jwks_uri (or issuer) passes the flags but not discovery's validation: upstream logs it and serves
    neither document (404), rather than failing to start."""
    async with _server(tmp_path, _keys(tmp_path, *DEFAULT_KEYS), jwks_uri="http://keys.example.com/jwks") as api:
        await _get(api, "/.well-known/openid-configuration", expect=404)
        await _get(api, "/openid/v1/jwks", expect=404)


async def _account_token(api: Client, name: str) -> str:
    ns = "/api/v1/namespaces/default/serviceaccounts"
    resp = await api.post(ns, json={"metadata": {"name": name}}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status == 201, await resp.text()
    resp = await api.post(f"{ns}/{name}/token", json={"spec": {}}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status == 201, await resp.text()
    token: str = (await resp.json())["status"]["token"]
    return token


def _verifying_key(key: dict[str, Any]) -> jwt.PublicKey:
    """What an external relying party does with the JWK set: rebuild the public key from its members."""
    def number(member: str) -> int:
        return int.from_bytes(base64.urlsafe_b64decode(key[member] + "=" * (-len(key[member]) % 4)), "big")

    if key["kty"] == "RSA":
        return rsa.RSAPublicNumbers(number("e"), number("n")).public_key()
    return ec.EllipticCurvePublicNumbers(number("x"), number("y"), ec.SECP256R1()).public_key()


DISCOVERY_PATHS = ["/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks",
                   "/openid/v1/jwks/"]


async def test_a_service_account_reads_both_and_verifies_its_token_with_the_keys(tmp_path: Path) -> None:
    """The bootstrap binding lets every service account read the documents; the key set verifies the account's
    own token offline (by its header's kid), as a federating verifier would."""
    async with _server(tmp_path, [SIGNING_KEY.public_key()]) as api:
        token = await _account_token(api, "federated")
        for path in DISCOVERY_PATHS:
            await _get(api, path, token=token)
        config, _ = await _get(api, "/.well-known/openid-configuration", token=token)
        assert config["id_token_signing_alg_values_supported"] == ["ES256"]
        keyset, _ = await _get(api, "/openid/v1/jwks", token=token)
        parsed = jwt.parse(token)
        assert parsed is not None
        [key] = [k for k in keyset["keys"] if k["kid"] == parsed.header["kid"]]
        assert parsed.header["alg"] == key["alg"]
        assert jwt.verify(parsed, [_verifying_key(key)])["iss"] == config["issuer"]


ANONYMOUS = [  # (name, --anonymous-auth, bind system:unauthenticated, status)
    ("anonymous disabled: 401", False, False, 401),
    ("anonymous enabled but not bound: 403", True, False, 403),
    ("anonymous enabled and bound: 200", True, True, 200),
]


@pytest.mark.parametrize("name,anonymous,bind,status", ANONYMOUS, ids=[c[0] for c in ANONYMOUS])
async def test_anonymous_reads_only_when_enabled_and_bound(tmp_path: Path, name: str, anonymous: bool, bind: bool,
                                                           status: int) -> None:
    async with _server(tmp_path, [SIGNING_KEY.public_key()], anonymous=anonymous) as api:
        if bind:  # what the Kubernetes docs suggest for public discovery
            binding = {"metadata": {"name": "oidc-reviewer"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "system:service-account-issuer-discovery"},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                     "name": "system:unauthenticated"}]}
            resp = await api.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding,
                                  headers={"Authorization": f"Bearer {ADMIN}"})
            assert resp.status == 201, await resp.text()
        for path in DISCOVERY_PATHS:
            body, _ = await _get(api, path, token=None, expect=status)
            if status == 403:
                assert body["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'


def test_bootstrap_role_and_binding_are_upstreams() -> None:
    """testdata/cluster-roles.yaml and cluster-role-bindings.yaml's entries (rbac-defaults label, autoupdate)."""
    meta = {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "name": "system:service-account-issuer-discovery"}
    [role] = [r for r in cluster_roles() if r["metadata"]["name"] == meta["name"]]
    assert role == {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
                    "rules": [{"nonResourceURLs": DISCOVERY_PATHS, "verbs": ["get"]}]}
    [binding] = [b for b in cluster_role_bindings() if b["metadata"]["name"] == meta["name"]]
    assert binding == {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": meta["name"]},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                     "name": "system:serviceaccounts"}]}
