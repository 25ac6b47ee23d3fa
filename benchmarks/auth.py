"""Authentication cost: service-account token signing and verification, and what it adds per request.

1. sign/verify: microseconds per TokenRequest signature and per authentication of a token (ES256
   with the default P-256 key, RS256 with a 2048-bit RSA key), checks of live objects included;
2. per request: GETs of one pod through the API server's own middleware and dispatch (in-process
   transport, SQLite store), with the admin token (a table lookup) and with a service-account token
   (RS256, as the default key; verified on every request: no token cache, so revocation is immediate).

    python -m benchmarks.auth [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kubelite.apiserver.app import ApiServer
from kubelite.apiserver.auth import jwt
from kubelite.apiserver.auth.config import AuthConfig, ServiceAccountConfig
from kubelite.apiserver.auth.serviceaccount import DEFAULT_ISSUER, Binding, ServiceAccountTokens
from kubelite.apiserver.inprocess import InProcessClient
from kubelite.clock import RealClock
from kubelite.store.sqlite import SQLiteStore

ADMIN = "bench-admin"
SA = {"metadata": {"name": "default", "namespace": "default", "uid": "u"}}


class _Live:
    def get(self, resource: str, namespace: str, name: str) -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": namespace, "uid": "u"}}

    def list(self, resource: str, namespace: str = "") -> list[dict[str, object]]:
        return []


def sign_and_verify(rounds: int) -> None:
    for key in (ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(public_exponent=65537,
                                                                                 key_size=2048)):
        tokens = ServiceAccountTokens(DEFAULT_ISSUER, key, [key.public_key()], (DEFAULT_ISSUER,), _Live(), RealClock())
        start = time.perf_counter()
        for _ in range(rounds // 10):
            token = tokens.issue(SA, [DEFAULT_ISSUER], 3600, Binding()).token
        signed = (time.perf_counter() - start) / (rounds // 10) * 1e6
        start = time.perf_counter()
        for _ in range(rounds):
            tokens.authenticate_token(token)
        verified = (time.perf_counter() - start) / rounds * 1e6
        print(f"{jwt.algorithm(key)}: sign {signed:.0f} µs, authenticate {verified:.0f} µs per token")


async def per_request(requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await SQLiteStore.open(Path(tmp) / "state.db")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # the default sa.key's kind
        server = ApiServer(store, RealClock(), frozenset({ADMIN}),
                           auth=AuthConfig(service_accounts=ServiceAccountConfig(key, (key.public_key(),))))
        await server.start()
        client = InProcessClient(server)
        await client.create("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "default"}})
        await client.create("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "busybox"}]}})
        answer = await client.create("/api/v1/namespaces/default/serviceaccounts/default/token", {})
        for label, token in (("admin token", ADMIN), ("service-account token", answer["status"]["token"])):
            headers = {"Authorization": f"Bearer {token}"}
            start = time.perf_counter()
            for _ in range(requests):
                reply = await client.exchange("GET", "/api/v1/namespaces/default/pods/p", headers=headers)
                assert reply.status == 200
                await reply.read()
            elapsed = time.perf_counter() - start
            print(f"GET pod with the {label}: {requests / elapsed:,.0f} requests/s, "
                  f"{elapsed / requests * 1e6:.0f} µs each")
        await server.stop()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    sign_and_verify(args.requests)
    asyncio.run(per_request(args.requests))


if __name__ == "__main__":
    main()
