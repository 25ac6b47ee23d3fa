"""metadata.generateName as upstream: SimpleNameGenerator cuts the base to 58 characters before its five random
ones (apiserver/pkg/storage/names/generate.go), so a generated name fits a DNS label; ValidateObjectMeta checks
generateName itself as a prefix (a trailing dash allowed) and reports a bad one on metadata.generateName as well
as on the name made of it. Real API server on SQLite, over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from tests.api.test_rest import call
from tests.api.test_services_api import SVCS, svc
from tests.conftest import SHARED_LOOP

Client = TestClient  # type: ignore[type-arg]
CMS = "/api/v1/namespaces/default/configmaps"


def _cm(generate: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": generate}}


def _svc(generate: str) -> dict[str, Any]:
    body = svc()
    body["metadata"] = {"generateName": generate}
    return body


@SHARED_LOOP
@pytest.mark.parametrize(("path", "body", "base"), [
    pytest.param(SVCS, _svc("s" * 60), "s" * 58, id="a 60-character generateName on a Service is cut to 58"),
    pytest.param(CMS, _cm("c" * 100), "c" * 58, id="a 100-character generateName on a ConfigMap is cut to 58"),
    pytest.param(CMS, _cm("web-"), "web-", id="a short generateName is kept whole, its trailing dash allowed"),
])
async def test_generated_name_is_cut_to_fit(shared_api: Client, path: str, body: dict[str, Any], base: str) -> None:
    name = (await call(shared_api, "POST", path, body, expect=201))["metadata"]["name"]
    assert name.startswith(base) and len(name) == len(base) + 5, name


@SHARED_LOOP
@pytest.mark.parametrize(("path", "body", "fields"), [
    pytest.param(CMS, _cm("Bad_"), ["metadata.generateName", "metadata.name"],
                 id="an invalid generateName is reported on generateName and on the name"),
    pytest.param(SVCS, _svc("1web-"), ["metadata.generateName", "metadata.name"],
                 id="a Service's generateName is checked as a DNS-1035 label prefix"),
    pytest.param(CMS, _cm("a-.-"), ["metadata.name"],
                 id="maskTrailingDash drops two characters, as upstream's: 'a-.-' passes as a prefix, its name not"),
])
async def test_invalid_generate_name(shared_api: Client, path: str, body: dict[str, Any], fields: list[str]) -> None:
    status = await call(shared_api, "POST", path, body, expect=422)
    assert [c["field"] for c in status["details"]["causes"]] == fields
