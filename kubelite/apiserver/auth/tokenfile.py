"""`--token-auth-file`: static bearer tokens in upstream's CSV format (plugin/pkg/authenticator/token/tokenfile).

    token,user,uid,"group1,group2,group3"

At least three columns; an empty token is skipped and a duplicate replaces the earlier line
(each logged), as upstream.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubelite.apiserver.auth.user import UserInfo

log = logging.getLogger("kubelite.apiserver.auth")


class TokenFileError(ValueError):
    pass


def parse_token_file(text: str, path: str) -> dict[str, UserInfo]:
    tokens: dict[str, UserInfo] = {}
    record_number = 0
    for record in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not record:  # Go's csv reader skips empty lines
            continue
        if len(record) < 3:
            raise TokenFileError(f"token file '{path}' must have at least 3 columns (token, user name, user uid), "
                                 f"found {len(record)}")
        record_number += 1
        token = record[0]
        if not token:
            log.warning("empty token has been found in token file '%s', record number '%d'", path, record_number)
            continue
        if token in tokens:
            log.warning("duplicate token has been found in token file '%s', record number '%d'", path, record_number)
        groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
        tokens[token] = UserInfo(record[1], record[2], groups)
    return tokens


def load_token_file(path: Path) -> dict[str, UserInfo]:
    return parse_token_file(path.read_text(), str(path))


@dataclass(frozen=True)
class StaticTokens:
    """A fixed token → user table: the token file, and the admin token `kubelite server` writes."""

    tokens: Mapping[str, UserInfo]

    def authenticate_token(self, token: str) -> UserInfo | None:
        return self.tokens.get(token)
