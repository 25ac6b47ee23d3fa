"""`--store` and the etcd TLS flags: what is accepted, and each refusal's message (exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubelite.store import StoreConfigError, StoreSpec
from kubelite.store.etcd.endpoints import EtcdConfigError, parse_url


@pytest.mark.parametrize(("url", "endpoints"), [
    pytest.param("etcd://127.0.0.1:2379", (("127.0.0.1", 2379),), id="one member"),
    pytest.param("etcd://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", (("127.0.0.1", 1), ("127.0.0.1", 2), ("127.0.0.1", 3)),
                 id="three members, every one a failover target"),
    pytest.param("etcd://localhost", (("localhost", 2379),), id="port defaults to etcd's 2379"),
    pytest.param("etcd://[::1]:2380/", (("::1", 2380),), id="IPv6 literal and a trailing slash"),
])
def test_parse_url(url: str, endpoints: tuple[tuple[str, int], ...]) -> None:
    assert parse_url(url).endpoints == endpoints


@pytest.mark.parametrize(("url", "message"), [
    pytest.param("http://127.0.0.1:2379", "is not etcd://", id="wrong scheme"),
    pytest.param("etcd://127.0.0.1:99999", "bad etcd endpoint", id="port out of range"),
    pytest.param("etcd://127.0.0.1:x", "bad etcd endpoint", id="port not a number"),
    pytest.param("etcd://,127.0.0.1:1", "bad etcd endpoint", id="empty endpoint"),
])
def test_parse_url_refusals(url: str, message: str) -> None:
    with pytest.raises(EtcdConfigError, match=message):
        parse_url(url)


def _spec_cases(tmp: Path) -> list[tuple[StoreSpec, str]]:
    cert = tmp / "client.crt"
    cert.write_text("x")
    return [
        (StoreSpec("postgres://x"), "want sqlite or etcd://"),
        (StoreSpec("sqlite", etcd_cafile=cert), "need --store etcd://"),
        (StoreSpec("etcd://127.0.0.1:2379", etcd_cafile=tmp / "missing.crt"), "does not exist"),
        (StoreSpec("etcd://127.0.0.1:2379", etcd_certfile=cert), "go together"),
    ]


def test_store_spec_refusals(tmp_path: Path) -> None:
    for spec, message in _spec_cases(tmp_path):
        with pytest.raises(StoreConfigError, match=message):
            spec.check()
    StoreSpec().check()
    StoreSpec("etcd://127.0.0.1:2379", etcd_cafile=tmp_path / "client.crt").check()


def test_cli_refuses_a_bad_store_before_starting(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--data-dir", str(tmp_path),
                          "--store", "etcd://127.0.0.1:notaport"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == "kubelite: --store: bad etcd endpoint '127.0.0.1:notaport' (want HOST:PORT)"


async def test_unreachable_etcd_is_a_set_up_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubelite.store.etcd import store as etcd_store
    from tests.conftest import free_port

    monkeypatch.setattr(etcd_store, "RETRY_FOR", 0.0)  # one attempt (CALL_TIMEOUT), not the 30 s of retries
    with pytest.raises(StoreConfigError, match=r"^--store etcd://127\.0\.0\.1:\d+: etcd unavailable"):
        await StoreSpec(f"etcd://127.0.0.1:{free_port()}").open(tmp_path)
