"""`kubelite server`'s authentication flags: a bad file is a clean configuration error (exit 2), never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

CASES = {
    "token file of two columns": ("--token-auth-file", "t1,user1\n", "must have at least 3 columns"),
    "signing key not a key": ("--service-account-signing-key-file", "not a key\n", "not a PEM private key"),
    "verification keys file without keys": ("--service-account-key-file", "nothing here\n",
                                            "no RSA or ECDSA public key found"),
    "client CA not a certificate": ("--client-ca-file", "nonsense\n", "--client-ca-file"),
}


@pytest.mark.parametrize(("flag", "content", "message"), CASES.values(), ids=CASES.keys())
def test_bad_auth_file_is_a_configuration_error(tmp_path: Path, flag: str, content: str, message: str) -> None:
    path = tmp_path / "file"
    path.write_text(content)
    res = subprocess.run([sys.executable, "-m", "kubelite.cli.main", "server", "--data-dir", str(tmp_path / "data"),
                          "--port", str(free_port()), "--disable", "scheduler,controllers", flag, str(path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
