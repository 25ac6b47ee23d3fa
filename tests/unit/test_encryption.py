"""Encryption at rest (kubelite/apiserver/encryption.py): the prefix transformer's read/write rules, the
EncryptionConfiguration parser, and Secrets through a real ApiServer on a real SQLite file whose bytes are read
back to prove no plaintext was stored. Cases follow k8s.io/apiserver/pkg/storage/value's prefix and AES-GCM tests."""

from __future__ import annotations

import base64
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubelite.apiserver.encryption import (
    EncryptingStore,
    EncryptionConfigError,
    PrefixTransformer,
    TransformError,
    load_config,
    parse_config,
)
from kubelite.store.sqlite import SQLiteStore
from tests.api.test_rest import call
from tests.conftest import serving

SECRET_KEY = "/registry/core/secrets/default/s"
PLAINTEXT = "correct-horse-battery-staple"


def key(n: int) -> str:
    return base64.b64encode(bytes([n]) * 32).decode()


def config(*providers: dict[str, Any], resources: tuple[str, ...] = ("secrets",)) -> dict[str, Any]:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": list(resources), "providers": list(providers)}]}


def aesgcm(*names: str) -> dict[str, Any]:
    return {"aesgcm": {"keys": [{"name": n, "secret": key(ord(n[-1]))} for n in names]}}


IDENTITY: dict[str, Any] = {"identity": {}}


def transformer(*providers: dict[str, Any]) -> PrefixTransformer:
    return parse_config(config(*providers))["/registry/core/secrets/"]


# Which provider writes, and which stored values each configuration reads.
ROUND_TRIPS = [
    pytest.param(aesgcm("k1"), aesgcm("k1"), b"k8s:enc:aesgcm:v1:k1:", id="same key reads its own writes"),
    pytest.param(aesgcm("k1"), aesgcm("k2", "k1"), b"k8s:enc:aesgcm:v1:k1:", id="rotation: old key still reads"),
    pytest.param(IDENTITY, [aesgcm("k1"), IDENTITY], b"", id="identity fallback reads plaintext"),
    pytest.param(aesgcm("k1"), [IDENTITY, aesgcm("k1")], b"k8s:enc:aesgcm:v1:k1:",
                 id="decrypting after encryption was turned off"),
]


@pytest.mark.parametrize("writer,reader,prefix", ROUND_TRIPS)
def test_round_trips(writer: dict[str, Any], reader: Any, prefix: bytes) -> None:
    stored = transformer(writer).to_storage(b"payload", SECRET_KEY)
    assert stored.startswith(prefix) and (prefix == b"" or b"payload" not in stored)
    readers = reader if isinstance(reader, list) else [reader]
    assert transformer(*readers).from_storage(stored, SECRET_KEY) == b"payload"


def test_first_provider_writes() -> None:
    assert transformer(aesgcm("new", "old")).to_storage(b"x", SECRET_KEY).startswith(b"k8s:enc:aesgcm:v1:new:")
    assert transformer(IDENTITY, aesgcm("k1")).to_storage(b"x", SECRET_KEY) == b"x"


def test_each_write_uses_a_fresh_nonce() -> None:
    t = transformer(aesgcm("k1"))
    assert t.to_storage(b"x", SECRET_KEY) != t.to_storage(b"x", SECRET_KEY)


def _flip_last_byte(stored: bytes) -> bytes:
    return stored[:-1] + bytes([stored[-1] ^ 1])


# Reads that must fail, with the words that say why.
UNREADABLE = [
    pytest.param(lambda s: s, aesgcm("k2"), SECRET_KEY, "no matching prefix found", id="key removed"),
    pytest.param(lambda s: s, IDENTITY, SECRET_KEY, "identity transformer tried to read encrypted data",
                 id="identity only"),
    pytest.param(_flip_last_byte, aesgcm("k1"), SECRET_KEY, "does not decrypt", id="tampered value"),
    pytest.param(lambda s: s, aesgcm("k1"), "/registry/core/secrets/default/other", "does not decrypt",
                 id="value copied to another object's key"),
    pytest.param(lambda s: b"plain", aesgcm("k1"), SECRET_KEY, "no matching prefix found",
                 id="plaintext without identity"),
]


@pytest.mark.parametrize("mangle,reader,read_key,message", UNREADABLE)
def test_unreadable(mangle: Any, reader: dict[str, Any], read_key: str, message: str) -> None:
    stored = mangle(transformer(aesgcm("k1")).to_storage(b"payload", SECRET_KEY))
    with pytest.raises(TransformError, match=message):
        transformer(reader).from_storage(stored, read_key)


# EncryptionConfiguration files the server refuses to start with.
BAD_CONFIGS = [
    pytest.param({"kind": "Something"}, "expected kind: EncryptionConfiguration", id="wrong kind"),
    pytest.param(config(aesgcm("k1"), resources=("configmaps",)), "only secrets can be encrypted",
                 id="resource other than secrets"),
    pytest.param(config({"aescbc": {"keys": []}}), "supported providers are aesgcm and identity",
                 id="unsupported provider"),
    pytest.param(config({"aesgcm": {"keys": []}}), "at least one key is required", id="aesgcm without keys"),
    pytest.param(config({"aesgcm": {"keys": [{"name": "k", "secret": base64.b64encode(b"short").decode()}]}}),
                 "key must be 16, 24 or 32 bytes, not 5", id="bad key length"),
    pytest.param(config({"aesgcm": {"keys": [{"name": "k", "secret": "***"}]}}), "must be base64",
                 id="key not base64"),
    pytest.param(config({"aesgcm": {"keys": [{"name": "a:b", "secret": key(1)}]}}), "a name without ':'",
                 id="key name with a colon"),
    pytest.param(config({"aesgcm": {}, "identity": {}}), "each entry names exactly one provider",
                 id="two providers in one entry"),
    pytest.param({"kind": "EncryptionConfiguration", "resources": []}, "no resources to encrypt", id="no resources"),
    pytest.param({"kind": "EncryptionConfiguration", "resources": ["secrets"]}, "expected a mapping",
                 id="rule that is not a mapping"),
    pytest.param(config({"aesgcm": ["k"]}), r"aesgcm: expected a mapping", id="provider spec that is not a mapping"),
    pytest.param(config({"aesgcm": {"keys": ["k"]}}), "a name without ':' is required", id="key that is not a mapping"),
]


@pytest.mark.parametrize("doc,message", BAD_CONFIGS)
def test_bad_configs(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(EncryptionConfigError, match=message):
        parse_config(doc)


def test_load_config_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "enc.yaml"
    path.write_text(f"""\
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: {key(7)}
      - identity: {{}}
""")
    assert list(load_config(path)) == ["/registry/core/secrets/"]
    with pytest.raises(EncryptionConfigError, match=r"enc-missing\.yaml"):
        load_config(tmp_path / "enc-missing.yaml")


# --- through a real ApiServer on a real SQLite file --------------------------------------------------------

@contextlib.asynccontextmanager
async def _serve(db: Path, *providers: dict[str, Any]) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    """A real ApiServer on the SQLite file `db` behind an EncryptingStore with these providers."""
    async with serving(EncryptingStore(await SQLiteStore.open(db), parse_config(config(*providers)))) as api:
        yield api


def _stored_bytes(db: Path) -> bytes:
    """Everything SQLite wrote: the database file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def _stored_values(db: Path, prefix: str) -> list[bytes]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT value FROM kv WHERE key LIKE ?", (prefix + "%",)).fetchall()
    return [bytes(r[0]) for r in rows]


SECRETS = "/api/v1/namespaces/default/secrets"


async def test_secret_never_reaches_the_database_file_in_plaintext(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with _serve(db, aesgcm("key1"), IDENTITY) as api:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": PLAINTEXT}}
        await call(api, "POST", SECRETS, body, expect=201)
        await call(api, "PATCH", f"{SECRETS}/s", {"stringData": {"other": PLAINTEXT + "-2"}},
                   "application/merge-patch+json", expect=200)
        await call(api, "POST", "/api/v1/namespaces/default/configmaps",
                   {"metadata": {"name": "visible"}, "data": {"k": "in-the-clear"}}, expect=201)
        got = await call(api, "GET", f"{SECRETS}/s", expect=200)
        assert base64.b64decode(got["data"]["password"]).decode() == PLAINTEXT
        listed = await call(api, "GET", SECRETS, expect=200)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["s"]
    raw = _stored_bytes(db)
    encoded = base64.b64encode(PLAINTEXT.encode())
    assert PLAINTEXT.encode() not in raw and encoded not in raw and b'"password"' not in raw
    assert b"in-the-clear" in raw  # the check can see plaintext: configmaps are not encrypted
    values = _stored_values(db, "/registry/core/secrets/")
    assert values and all(v.startswith(b"k8s:enc:aesgcm:v1:key1:") for v in values)


async def test_rotation_reads_old_values_and_writes_with_the_new_key(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with _serve(db, IDENTITY) as api:
        await call(api, "POST", SECRETS, {"metadata": {"name": "old-plain"}, "stringData": {"k": "v0"}}, expect=201)
    async with _serve(db, aesgcm("key1"), IDENTITY) as api:
        await call(api, "POST", SECRETS, {"metadata": {"name": "one"}, "stringData": {"k": "v1"}}, expect=201)
    async with _serve(db, aesgcm("key2", "key1"), IDENTITY) as api:  # restart: the cache lists every value back
        for name, value in (("old-plain", "v0"), ("one", "v1")):
            got = await call(api, "GET", f"{SECRETS}/{name}", expect=200)
            assert base64.b64decode(got["data"]["k"]).decode() == value
        await call(api, "PUT", f"{SECRETS}/one", {"metadata": {"name": "one"}, "stringData": {"k": "v2"}},
                   expect=200)
    by_name = {v.split(b":")[4]: v for v in _stored_values(db, "/registry/core/secrets/default/one")}
    assert list(by_name) == [b"key2"]


async def test_secret_values_never_appear_in_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every path that logs (bad input, a refused update, an internal error while decoding) at DEBUG."""
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "state.db"
    async with _serve(db, aesgcm("key1")) as api:
        await call(api, "POST", SECRETS, {"metadata": {"name": "s"}, "stringData": {"p": PLAINTEXT}}, expect=201)
        await call(api, "POST", SECRETS, {"metadata": {"name": "d"}, "type": "kubernetes.io/dockerconfigjson",
                                          "stringData": {".dockerconfigjson": PLAINTEXT}}, expect=422)
        await call(api, "POST", SECRETS, {"metadata": {"name": "i"}, "immutable": True,
                                          "stringData": {"p": PLAINTEXT}}, expect=201)
        await call(api, "PUT", f"{SECRETS}/i", {"metadata": {"name": "i"}, "immutable": True,
                                                "stringData": {"p": PLAINTEXT + "x"}}, expect=422)
    with pytest.raises(TransformError):  # a server restarted without the key cannot read them, and says so
        async with _serve(db, IDENTITY):
            pass
    text = caplog.text
    assert PLAINTEXT not in text and base64.b64encode(PLAINTEXT.encode()).decode() not in text
