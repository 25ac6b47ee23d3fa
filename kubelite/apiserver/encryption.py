"""Encryption at rest for Secrets: upstream's EncryptionConfiguration, applied at the storage boundary.

Mirrors k8s.io/apiserver/pkg/server/options/encryptionconfig and storage/value: the file given by
`--encryption-key-file` is an `apiserver.config.k8s.io/v1` EncryptionConfiguration whose providers
are `aesgcm` (keys of 16, 24 or 32 bytes, base64) and `identity`. The first provider writes; every
provider reads, recognised by its prefix: an AES-GCM value is stored as
`k8s:enc:aesgcm:v1:<keyname>:` + a 12-byte random nonce + the sealed object, authenticated with the
storage key (so a value cannot be replayed under another object's key), and `identity` (empty prefix)
reads what was stored in plaintext before encryption was turned on. Rotation is upstream's: put the
new key first, keep the old ones to read, then rewrite every Secret.

`EncryptingStore` wraps the store the API server is given, so values are transformed on every path
(create, update, get, list, watch) for the configured resources only, and nothing above it changes.
Only `secrets` may be configured (the other resources' values are not secret). Not done: the
`aescbc`, `secretbox` and KMS providers, and upstream's rewrite of a value read with a non-first key
on a no-op update.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kubelite.store.interface import Event, KeyValue, ListResult, RevisionMismatch, Store, StoreError, WrappedStore

NONCE_SIZE = 12
ENCRYPTED_MARK = b"k8s:enc:"
AESGCM_PREFIX = "k8s:enc:aesgcm:v1:"
ENCRYPTABLE = {"secrets": "/registry/core/secrets/"}


class EncryptionConfigError(ValueError):
    """The EncryptionConfiguration file is unusable; the server refuses to start."""


class TransformError(StoreError):
    """A stored value no configured provider can read (a missing key, a tampered value)."""


@dataclasses.dataclass(frozen=True)
class Provider:
    """One way to read and write values: its prefix, and its AES-GCM key (None: identity, plaintext)."""

    prefix: bytes
    aead: AESGCM | None

    def seal(self, plain: bytes, key: str) -> bytes:
        if self.aead is None:
            return plain
        nonce = os.urandom(NONCE_SIZE)
        return self.prefix + nonce + self.aead.encrypt(nonce, plain, key.encode())

    def open(self, stored: bytes, key: str) -> bytes:
        if self.aead is None:
            if stored.startswith(ENCRYPTED_MARK):  # upstream's identity transformer refuses these too
                raise TransformError(f"{key}: identity transformer tried to read encrypted data")
            return stored
        body = stored[len(self.prefix):]
        try:
            return self.aead.decrypt(body[:NONCE_SIZE], body[NONCE_SIZE:], key.encode())
        except InvalidTag:
            raise TransformError(f"{key}: the value does not decrypt with key "
                                 f"{self.prefix.decode()!r} (tampered or a different key)") from None


class PrefixTransformer:
    """value.NewPrefixTransformers: write with the first provider, read with the one whose prefix matches."""

    def __init__(self, providers: list[Provider]) -> None:
        if not providers:
            raise EncryptionConfigError("at least one provider is required")
        self.providers = providers
        # Longest prefix first, so identity (empty prefix) is the fallback it is upstream.
        self._readers = sorted(providers, key=lambda p: len(p.prefix), reverse=True)

    def to_storage(self, plain: bytes, key: str) -> bytes:
        return self.providers[0].seal(plain, key)

    def from_storage(self, stored: bytes, key: str) -> bytes:
        for provider in self._readers:
            if stored.startswith(provider.prefix):
                return provider.open(stored, key)
        raise TransformError(f"{key}: no matching prefix found (is the key that wrote it still configured, "
                             "or identity for values stored before encryption?)")


def _aesgcm_providers(spec: Mapping[str, Any], where: str) -> list[Provider]:
    out = []
    for j, entry in enumerate(spec.get("keys") or []):
        name, secret = (entry.get("name"), entry.get("secret")) if isinstance(entry, dict) else (None, None)
        if not name or not isinstance(name, str) or ":" in name:
            raise EncryptionConfigError(f"{where}.keys[{j}].name: a name without ':' is required")
        try:
            raw = base64.b64decode(str(secret or ""), validate=True)
        except ValueError:
            raise EncryptionConfigError(f"{where}.keys[{j}].secret: must be base64") from None
        if len(raw) not in (16, 24, 32):
            raise EncryptionConfigError(f"{where}.keys[{j}].secret: key must be 16, 24 or 32 bytes, "
                                        f"not {len(raw)}")
        out.append(Provider(f"{AESGCM_PREFIX}{name}:".encode(), AESGCM(raw)))
    if not out:
        raise EncryptionConfigError(f"{where}.keys: at least one key is required")
    return out


def parse_config(doc: Any) -> dict[str, PrefixTransformer]:
    """An EncryptionConfiguration document → a transformer per storage key prefix."""
    if not isinstance(doc, dict) or doc.get("kind") != "EncryptionConfiguration":
        raise EncryptionConfigError("expected kind: EncryptionConfiguration (apiserver.config.k8s.io/v1)")
    out: dict[str, PrefixTransformer] = {}
    for i, rule in enumerate(doc.get("resources") or []):
        if not isinstance(rule, dict):
            raise EncryptionConfigError(f"resources[{i}]: expected a mapping with resources and providers")
        providers: list[Provider] = []
        for k, entry in enumerate(rule.get("providers") or []):
            where = f"resources[{i}].providers[{k}]"
            if not isinstance(entry, dict) or len(entry) != 1:
                raise EncryptionConfigError(f"{where}: each entry names exactly one provider")
            ((kind, spec),) = entry.items()
            if not isinstance(spec or {}, dict):
                raise EncryptionConfigError(f"{where}.{kind}: expected a mapping")
            if kind == "aesgcm":
                providers += _aesgcm_providers(spec or {}, f"{where}.aesgcm")
            elif kind == "identity":
                providers.append(Provider(b"", None))
            else:
                raise EncryptionConfigError(f"{where}: supported providers are aesgcm and identity, not {kind!r}")
        for resource in rule.get("resources") or []:
            prefix = ENCRYPTABLE.get(str(resource))
            if prefix is None:
                raise EncryptionConfigError(f"resources[{i}].resources: only secrets can be encrypted, "
                                            f"not {resource!r}")
            if prefix not in out:  # upstream: the first rule naming a resource wins
                out[prefix] = PrefixTransformer(providers)
    if not out:
        raise EncryptionConfigError("no resources to encrypt (expected resources: [secrets])")
    return out


def load_config(path: Path) -> dict[str, PrefixTransformer]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise EncryptionConfigError(f"{path}: {exc}") from None
    return parse_config(doc)


class EncryptingStore(WrappedStore):
    """A Store that seals values under the configured key prefixes on the way in and opens them on the way out."""

    def __init__(self, inner: Store, transformers: Mapping[str, PrefixTransformer]) -> None:
        super().__init__(inner)
        self.transformers = dict(transformers)

    def _transformer(self, key: str) -> PrefixTransformer | None:
        for prefix, transformer in self.transformers.items():
            if key.startswith(prefix):
                return transformer
        return None

    def _seal(self, key: str, value: bytes) -> bytes:
        transformer = self._transformer(key)
        return value if transformer is None else transformer.to_storage(value, key)

    def _open(self, kv: KeyValue) -> KeyValue:
        transformer = self._transformer(kv.key)
        if transformer is None or not kv.value:
            return kv
        return kv._replace(value=transformer.from_storage(kv.value, kv.key))

    async def get(self, key: str) -> KeyValue | None:
        kv = await self.inner.get(key)
        return None if kv is None else self._open(kv)

    async def list(self, prefix: str, revision: int = 0) -> ListResult:
        listed = await self.inner.list(prefix, revision)
        return ListResult([self._open(kv) for kv in listed.items], listed.revision)

    async def create(self, key: str, value: bytes) -> KeyValue:
        return (await self.inner.create(key, self._seal(key, value)))._replace(value=value)

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KeyValue:
        try:
            kv = await self.inner.update(key, self._seal(key, value), expected_mod_revision)
        except RevisionMismatch as exc:
            raise self._opened(exc) from None
        return kv._replace(value=value)

    async def delete(self, key: str, expected_mod_revision: int = 0) -> KeyValue:
        try:
            return self._open(await self.inner.delete(key, expected_mod_revision))
        except RevisionMismatch as exc:
            raise self._opened(exc) from None

    def _opened(self, exc: RevisionMismatch) -> RevisionMismatch:
        """A lost compare-and-swap reports the current value, which callers read as plaintext too."""
        return RevisionMismatch(exc.key, None if exc.current is None else self._open(exc.current))

    async def watch(self, prefix: str, from_revision: int, progress: bool = False) -> AsyncIterator[Event]:
        async for ev in self.inner.watch(prefix, from_revision, progress):
            if self._transformer(ev.kv.key) is None:
                yield ev
            else:
                yield ev._replace(kv=self._open(ev.kv), prev=None if ev.prev is None else self._open(ev.prev))
