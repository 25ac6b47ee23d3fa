"""The answer's media type from Accept (endpoints/handlers/negotiation): JSON, YAML or protobuf, whichever Accept
ranks first; none of them is 406 NotAcceptable before anything is done. The Accept headers kubectl, client-go and
the official Python client send keep their answers. Real API server on SQLite, over HTTP."""

from __future__ import annotations

import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"
PROTOBUF = "application/vnd.kubernetes.protobuf"
NOT_ACCEPTABLE = ("only the following media types are accepted: application/json, application/yaml, "
                  "application/vnd.kubernetes.protobuf")
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v: 1", "pem": "a\nb\n"}}


@pytest.mark.parametrize(("accept", "media"), [
    pytest.param("", "application/json", id="no Accept: JSON"),
    pytest.param("application/json", "application/json", id="the Python client's Accept: JSON"),
    pytest.param("application/json, */*", "application/json", id="JSON then anything: JSON"),
    pytest.param("*/*", "application/json", id="anything: JSON"),
    pytest.param("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                 "application/json", "application/json", id="kubectl get's Table request: JSON"),
    pytest.param(f"{PROTOBUF}, */*", PROTOBUF, id="client-go's protobuf first: protobuf"),
    pytest.param("application/yaml", "application/yaml", id="YAML asked: YAML"),
    pytest.param("text/html, application/yaml;q=0.9", "application/yaml", id="what cannot be served is skipped"),
    pytest.param("application/json;q=0.5, application/yaml", "application/yaml", id="q values rank"),
    pytest.param("*/*, application/yaml", "application/yaml", id="a full type ranks before */* of equal q"),
    pytest.param("text/html", None, id="HTML only: 406"),
    pytest.param("application/json;q=0", None, id="JSON refused with q=0: 406"),
])
async def test_output_media_type(api: Client, accept: str, media: str | None) -> None:
    await call(api, "POST", CMS, CM, expect=201)
    resp = await api.get(f"{CMS}/c", headers={"Accept": accept} if accept else {"Accept": ""})
    body = await resp.read()
    if media is None:
        assert resp.status == 406
        status = orjson.loads(body)
        assert (status["reason"], status["message"]) == ("NotAcceptable", NOT_ACCEPTABLE)
        return
    assert resp.status == 200 and resp.content_type == media
    if media == "application/yaml":
        assert yaml.safe_load(body)["data"] == CM["data"]
    elif media == "application/json":  # the object, or for kubectl its Table
        assert orjson.loads(body)["kind"] in ("ConfigMap", "Table")


async def test_not_acceptable_is_refused_before_the_write(api: Client) -> None:
    resp = await api.post(CMS, data=orjson.dumps(CM), headers={"Accept": "text/html",
                                                               "Content-Type": "application/json"})
    assert resp.status == 406
    await call(api, "GET", f"{CMS}/c", expect=404)


async def test_yaml_list_keys_sorted(api: Client) -> None:
    """sigs.k8s.io/yaml writes a map's keys sorted and a multi-line string as a literal block."""
    await call(api, "POST", CMS, CM, expect=201)
    text = (await (await api.get(CMS, headers={"Accept": "application/yaml"})).read()).decode()
    assert text.startswith("apiVersion: v1\nitems:\n")
    assert "    pem: |\n      a\n      b\n" in text, text
