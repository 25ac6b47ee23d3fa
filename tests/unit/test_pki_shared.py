"""Several API servers share one CA (README "Many machines: several API servers"): the PKI files copied from
the first server are kept, and each server serves a certificate of that CA valid for its own address."""

from __future__ import annotations

import ipaddress
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from kubelite.apiserver import pki

FIRST = ["10.0.0.1"]
SECOND = ["10.0.0.2"]


def sans(crt: Path) -> set[str]:
    ext = x509.load_pem_x509_certificate(crt.read_bytes()).extensions
    return {str(n.value) for n in ext.get_extension_for_class(x509.SubjectAlternativeName).value}


def issuer_key_ok(crt: Path, ca: Path) -> bool:
    cert, authority = (x509.load_pem_x509_certificate(p.read_bytes()) for p in (crt, ca))
    try:
        cert.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def copy_ca_only(src: Path, dst: Path) -> None:
    dst.mkdir()
    for name in ("ca.crt", "ca.key", "sa.key"):
        shutil.copy2(src / name, dst / name)


def copy_whole_dir(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)


@pytest.mark.parametrize("copy", [pytest.param(copy_ca_only, id="ca.crt, ca.key and sa.key copied"),
                                  pytest.param(copy_whole_dir, id="the whole pki directory copied")])
def test_second_server_keeps_the_ca_and_serves_its_own_address(tmp_path: Path,
                                                               copy: Callable[[Path, Path], None]) -> None:
    first_ca, first_crt, _ = pki.ensure_pki(tmp_path / "one", FIRST)
    pki.ensure_service_account_key(tmp_path / "one")
    copy(tmp_path / "one", tmp_path / "two")
    ca, crt, _ = pki.ensure_pki(tmp_path / "two", SECOND)
    assert ca.read_bytes() == first_ca.read_bytes()
    assert (tmp_path / "two" / "ca.key").read_bytes() == (tmp_path / "one" / "ca.key").read_bytes()
    assert (tmp_path / "two" / "sa.key").read_bytes() == (tmp_path / "one" / "sa.key").read_bytes()
    assert "10.0.0.2" in sans(crt) and issuer_key_ok(crt, ca)
    assert "10.0.0.2" not in sans(first_crt)


def test_restart_with_the_same_addresses_keeps_the_serving_certificate(tmp_path: Path) -> None:
    _, crt, key = pki.ensure_pki(tmp_path, FIRST)
    before = crt.read_bytes(), key.read_bytes()
    pki.ensure_pki(tmp_path, FIRST)
    assert (crt.read_bytes(), key.read_bytes()) == before


def test_a_new_address_reissues_the_serving_certificate_from_the_same_ca(tmp_path: Path) -> None:
    ca, crt, _ = pki.ensure_pki(tmp_path, FIRST)
    ca_before = ca.read_bytes()
    pki.ensure_pki(tmp_path, [*FIRST, "kubelite.example"])
    assert ca.read_bytes() == ca_before
    assert {"kubelite.example", str(ipaddress.ip_address("10.0.0.1"))} <= sans(crt)
    assert issuer_key_ok(crt, ca)
