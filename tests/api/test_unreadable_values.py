"""Numbers Go cannot read, and stored values that do not read as objects, never reach or stop the watch cache.

A reviewer found that a 401-digit integer in a YAML body of a custom resource was stored, then stopped the watch
cache when the object was deleted (orjson: "number is infinity"), after which every read was stale, writes hung
and the server could not start again. Bodies now read numbers as Go's decoder does (`request.go_numbers`), and
the cache logs and leaves out any stored value it cannot read, at start, on relist and in its watch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubelite.apiserver.registry.config import CONFIG_MAPS
from kubelite.store.sqlite import SQLiteStore
from tests.api.test_customresources_api import CRDS, WIDGETS, established, widget, widget_crd
from tests.api.test_rest import call
from tests.conftest import serving_server

YAML = "application/yaml"


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("1" + "0" * 400, "json: cannot unmarshal number 1000", id="an integer beyond float64"),
    pytest.param(".inf", "json: unsupported value: +Inf", id="a YAML infinity"),
    pytest.param(".nan", "json: unsupported value: NaN", id="a YAML NaN"),
])
async def test_a_yaml_number_go_cannot_read_is_a_400(tmp_path: Path, text: str, message: str) -> None:
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db")) as (_, api):
        await call(api, "POST", CRDS, widget_crd(), expect=201)
        await established(api, "widgets.example.com")
        body = yaml.safe_dump(widget("big")).replace("spec: {}", f"spec: {{huge: {text}}}")
        body = body if "huge" in body else body + f"\nextra: {text}\n"
        out = await call(api, "POST", WIDGETS, body.encode(), YAML, expect=400)
        assert message in out["message"], out
        await call(api, "POST", "/api/v1/namespaces/default/configmaps",
                   f"metadata: {{name: cm}}\ndata: {{a: b}}\nx: {text}\n".encode(), YAML, expect=400)


async def test_an_integer_beyond_64_bits_is_a_float_as_in_go(tmp_path: Path) -> None:
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db")) as (_, api):
        out = await call(api, "POST", "/api/v1/namespaces/default/configmaps",
                         b"metadata: {name: cm, annotations: {a: b}}\nbinaryData: {}\nx: 36893488147419103232\n", YAML,
                         expect=201)
        assert "x" not in out  # not a ConfigMap field: pruned, as before; stored and read back fine
        await call(api, "GET", "/api/v1/namespaces/default/configmaps/cm", expect=200)


async def test_an_unreadable_stored_value_is_left_out_not_fatal(tmp_path: Path) -> None:
    """A value no object reads from (written by another writer of the store) is logged and left out: at start,
    and as a watch event, after which the server still reads and writes."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    await store.create(CONFIG_MAPS.key("default", "broken"), b'{"metadata": {"name": "broken"}, "n": 1e999}')
    async with serving_server(store) as (server, api):
        await call(api, "GET", "/api/v1/namespaces/default/configmaps/broken", expect=404)
        await server.store.create(CONFIG_MAPS.key("default", "later"), b"[1, 2")  # through the watch
        await call(api, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "ok"}}, expect=201)
        listed = await call(api, "GET", "/api/v1/namespaces/default/configmaps", expect=200)
        assert [c["metadata"]["name"] for c in listed["items"] if c["metadata"]["name"] != "kube-root-ca.crt"] == [
            "ok"]
