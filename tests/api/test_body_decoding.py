"""Go's decoding of a request body, where it takes what a strict decoder would refuse: invalid UTF-8 inside a JSON
string becomes U+FFFD, one per bad byte (encoding/json's unquote, sigs.k8s.io/json alike), and a YAML body is its
first document (sigs.k8s.io/yaml's YAMLToJSON is go-yaml v2's Unmarshal, which reads one). Real API server on
SQLite, over HTTP."""

from __future__ import annotations

import orjson
import pytest
from aiohttp.test_utils import TestClient

from tests.conftest import SHARED_LOOP

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
JSON = "application/json"
YAML = "application/yaml"


@SHARED_LOOP
# (object name, body, content type, query, status, the object's data — or, refused, a text of the message)
@pytest.mark.parametrize(("name", "body", "ctype", "query", "status", "want"), [
    pytest.param("bad-byte", b'{"metadata": {"name": "bad-byte"}, "data": {"k": "a\xffb"}}', JSON, "", 201,
                 {"k": "a\ufffdb"}, id="invalid byte in a JSON string: U+FFFD"),
    pytest.param("truncated", b'{"metadata": {"name": "truncated"}, "data": {"k": "\xe2\x82x"}}', JSON, "", 201,
                 {"k": "\ufffd\ufffdx"}, id="truncated sequence: one U+FFFD per byte, as Go"),
    pytest.param("surrogate", b'{"metadata": {"name": "surrogate"}, "data": {"k": "\xed\xa0\x80"}}', JSON, "", 201,
                 {"k": "\ufffd" * 3}, id="UTF-8 encoded surrogate: U+FFFD per byte"),
    pytest.param("key", b'{"metadata": {"name": "key"}, "data": {"k\xff": "v"}}', JSON, "", 422,
                 'data[k\ufffd]: Invalid value: "k\ufffd"', id="invalid byte in a key: U+FFFD, then validated"),
    pytest.param("mixed", b'{"metadata": {"name": "mixed"}, "data": {"k": "\xff\\ud800"}}', JSON, "", 201,
                 {"k": "\ufffd\ufffd"}, id="invalid byte and lone surrogate escape together"),
    pytest.param("strict", b'{"metadata": {"name": "strict"}, "data": {"k": "\xff"}}', JSON,
                 "?fieldValidation=Strict", 201, {"k": "\ufffd"}, id="Strict field validation reads it too"),
    pytest.param("outside", b'{"metadata": {"name": "outside"}, "data": \xff}', JSON, "", 400,
                 "could not be decoded", id="invalid byte outside a string: 400"),
    pytest.param("first", b"metadata: {name: first}\ndata: {k: one}\n---\nmetadata: {name: second}\n", YAML, "",
                 201, {"k": "one"}, id="YAML of two documents: the first"),
    pytest.param("broken", b"metadata: {name: broken}\ndata: {k: one}\n---\n- [unclosed\n", YAML, "", 201,
                 {"k": "one"}, id="YAML whose second document is malformed: the first"),
    pytest.param("leading", b"---\nmetadata: {name: leading}\ndata: {k: one}\n---\n", YAML, "", 201,
                 {"k": "one"}, id="YAML with document markers around one document"),
    pytest.param("empty-first", b"---\n---\nmetadata: {name: empty-first}\n", YAML, "", 400,
                 "must be a ConfigMap object", id="YAML whose first document is empty: 400"),
    pytest.param("yaml-utf8", b"metadata: {name: yaml-utf8}\ndata: {k: \"a\xffb\"}\n", YAML, "", 400,
                 "could not be decoded", id="invalid UTF-8 in YAML: 400, as go-yaml"),
])
async def test_body_decoding(shared_api: Client, name: str, body: bytes, ctype: str, query: str, status: int,
                             want: dict[str, str] | str) -> None:
    resp = await shared_api.post(CMS + query, data=body, headers={"Content-Type": ctype})
    out = orjson.loads(await resp.read())
    assert resp.status == status, out
    if isinstance(want, str):
        assert want in out["message"], out
        return
    assert out["data"] == want
    got = orjson.loads(await (await shared_api.get(f"{CMS}/{name}")).read())
    assert got["data"] == want


@SHARED_LOOP
async def test_apply_patch_takes_the_first_yaml_document(shared_api: Client) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {k: one}\n---\ndata: {k: two}\n"
    resp = await shared_api.patch(f"{CMS}/applied?fieldManager=m", data=body,
                                  headers={"Content-Type": "application/apply-patch+yaml"})
    assert resp.status == 201, await resp.read()
    assert orjson.loads(await resp.read())["data"] == {"k": "one"}
