"""Invalid UTF-8 read as Go reads it: every byte that starts no valid sequence becomes U+FFFD.

Go's JSON decoder (encoding/json, and sigs.k8s.io/json that kube-apiserver decodes bodies with) accepts any
byte inside a string and, unquoting it, replaces each byte `utf8.DecodeRune` cannot decode — one U+FFFD per
byte, not per maximal invalid sequence as Python's "replace" does (`b"\\xe2\\x82"` is two, not one).
"""

from __future__ import annotations

import codecs

_HANDLER = "kubelite-go-replace"


def _per_byte(exc: UnicodeError) -> tuple[str, int]:
    """Python reports each maximal invalid subpart once; Go replaces each of its bytes."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd" * (exc.end - exc.start), exc.end


codecs.register_error(_HANDLER, _per_byte)


def decode(data: bytes) -> str:
    """`data` as text, its invalid UTF-8 replaced byte by byte (valid text decodes as it always does)."""
    return data.decode("utf-8", _HANDLER)
