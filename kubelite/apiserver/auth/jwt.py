"""Compact JWS (RFC 7515) with RS256 and ES256, on `cryptography`: what service-account tokens need.

Upstream signs with go-jose; the key id is the unpadded base64url SHA-256 of the public key's
DER SubjectPublicKeyInfo (pkg/serviceaccount/jwt.go keyIDFromPublicKey), so tokens from this
server look like kube-apiserver's. Only the two algorithms upstream accepts for these keys are supported.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from kubelite.apiserver.auth.authenticator import InvalidCredential

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
_ES256_PART = 32  # P-256: r and s are 32 bytes each in a JWS signature


class KeyFileError(ValueError):
    """A key file that holds no usable key (the message names the file)."""


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515's encoding of a JWS's parts, and of a JWK's members)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id(public: PublicKey) -> str:
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def algorithm(key: PrivateKey | PublicKey) -> str:
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return "RS256"
    if isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise KeyFileError(f"unsupported elliptic curve {key.curve.name}: service-account keys must be RSA or P-256")


def load_signing_key(path: Path) -> PrivateKey:
    """`--service-account-signing-key-file`: a PEM private key, RSA or EC P-256."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a PEM private key: {exc}") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise KeyFileError(f"{path}: service-account keys must be RSA or ECDSA")
    algorithm(key)
    return key


def load_public_keys(path: Path) -> list[PublicKey]:
    """`--service-account-key-file`: every public key in a PEM file of public keys, private keys or certificates
    (keyutil.PublicKeysFromFile)."""
    data = path.read_bytes()
    keys: list[PublicKey] = []
    for block in data.split(b"-----END ")[:-1]:
        begin = block.find(b"-----BEGIN ")
        if begin < 0:
            continue
        label = block[begin + 11:block.index(b"-----", begin + 11)]
        pem = block[begin:] + b"-----END " + label + b"-----\n"
        key: Any
        if label == b"CERTIFICATE":
            key = x509.load_pem_x509_certificate(pem).public_key()
        elif label == b"PUBLIC KEY" or label == b"RSA PUBLIC KEY":
            key = serialization.load_pem_public_key(pem)
        elif label.endswith(b"PRIVATE KEY"):
            key = serialization.load_pem_private_key(pem, password=None).public_key()
        else:
            continue
        if isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey)):
            keys.append(key)
    if not keys:
        raise KeyFileError(f"{path}: no RSA or ECDSA public key found")
    return keys


def sign(claims: dict[str, Any], key: PrivateKey) -> str:
    alg = algorithm(key)
    header = {"alg": alg, "kid": key_id(key.public_key())}
    signing_input = f"{b64url(orjson.dumps(header))}.{b64url(orjson.dumps(claims))}".encode()
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(_ES256_PART, "big") + s.to_bytes(_ES256_PART, "big")
    return f"{signing_input.decode()}.{b64url(signature)}"


@dataclass(frozen=True)
class Parsed:
    """A compact JWS split and decoded once: header and claims (unverified until `verify`), what was signed, and
    the signature."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def parse(token: str) -> Parsed | None:
    """The parts of something shaped like a compact JWS; None when it is not one (another authenticator's token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header = orjson.loads(_unb64(parts[0]))
        claims = orjson.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    return Parsed(header, claims, f"{parts[0]}.{parts[1]}".encode(), signature)


def verify(parsed: Parsed, keys: list[PublicKey]) -> dict[str, Any]:
    """The claims of a token signed by one of `keys` (with the algorithm its header names); else InvalidCredential."""
    signature, signing_input = parsed.signature, parsed.signing_input
    for key in keys:
        if parsed.header.get("alg") != algorithm(key):
            continue
        try:
            if isinstance(key, rsa.RSAPublicKey):
                key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            else:
                if len(signature) != 2 * _ES256_PART:
                    continue
                r = int.from_bytes(signature[:_ES256_PART], "big")
                s = int.from_bytes(signature[_ES256_PART:], "big")
                key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        return parsed.claims
    raise InvalidCredential("invalid signature")
