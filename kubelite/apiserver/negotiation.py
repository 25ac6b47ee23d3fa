"""The media type of a resource answer, from the request's Accept header, as apiserver's
endpoints/handlers/negotiation NegotiateOutputMediaType chooses it.

The clauses are ranked as goautoneg ranks them (q value, then a full type before `type/*` before `*/*`, then
their order); the first one the server can encode wins: JSON (also for `*/*`, `application/*` and every
`application/json;…` variant: Tables, discovery, watch streams), YAML, or protobuf. None of them: 406
NotAcceptable, before the request does anything (upstream negotiates before the write). A missing or empty
Accept is JSON. Protobuf's own finer rule (a Table request never is) stays in protobuf.prefers_protobuf.

A clause asking for a stream (`;stream=watch`) of a type with no stream form (YAML), or for another stream than
`watch`, is skipped, as acceptMediaTypeOptions skips it. A watch whose first-ranked type has no stream form is
406 (NegotiateOutputMediaTypeStream): YAML asked first is not served as JSON, though JSON is acceptable too.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

from kubelite.api import errors
from kubelite.apiserver import protobuf

JSON = "application/json"
YAML = "application/yaml"
SERVED = (JSON, YAML, protobuf.MEDIA_TYPE)
STREAMED = (JSON, protobuf.MEDIA_TYPE)  # the types with a stream serializer, in the server's order
_WILDCARDS = {"*/*": JSON, "application/*": JSON}


@functools.lru_cache(maxsize=256)  # a pure function of a header that nearly every client sends the same
def output_media_type(accept: str) -> str | None:
    """The served media type Accept ranks first, or None when it admits none of them."""
    if not accept.strip():
        return JSON
    ranked: list[tuple[float, int, int, str]] = []
    for index, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        media = media.lower()
        if not media:
            continue
        options = dict(p.partition("=")[::2] for p in params)
        try:
            q = float(options.get("q", "1"))
        except ValueError:
            q = 0.0
        if q <= 0:
            continue
        stream = options.get("stream", "")
        if stream and (stream != "watch" or media == YAML):
            continue
        specificity = 0 if media == "*/*" else 1 if media.endswith("/*") else 2
        ranked.append((q, specificity, -index, media))
    for *_, media in sorted(ranked, reverse=True):
        if media in SERVED:
            return media
        if media in _WILDCARDS:
            return _WILDCARDS[media]
    return None


def check_acceptable(accept: str) -> str:
    """The answer's media type, or upstream's 406 when Accept admits none the server encodes."""
    media = output_media_type(accept)
    if media is None:
        raise errors.ApiError(406, "NotAcceptable",
                              "only the following media types are accepted: " + ", ".join(SERVED))
    return media


def check_stream_acceptable(accept: str) -> str:
    """A watch's media type: as `check_acceptable`'s, but 406 when that type has no stream form (YAML), naming the
    stream types as MediaTypesForSerializer names them."""
    media = check_acceptable(accept)
    if media not in STREAMED:
        raise errors.ApiError(406, "NotAcceptable", "only the following media types are accepted: " +
                              ", ".join(f"{m};stream=watch" for m in STREAMED))
    return media


class _Dumper(yaml.SafeDumper):
    """sigs.k8s.io/yaml's output (go-yaml v2): a string holding a newline is a literal block."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def to_yaml(obj: Any) -> bytes:
    """A YAML answer: keys sorted and block style, as sigs.k8s.io/yaml writes an object (and kubectl -o yaml)."""
    out: str = yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, allow_unicode=True, sort_keys=True)
    return out.encode()
