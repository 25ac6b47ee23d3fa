"""CustomResourceDefinitions and the custom resources they define, against a real in-process server over HTTP.

A CRD created while the server runs is served without a restart, and after one; its resources are pruned, defaulted
and validated by the version's structural schema (422s with kube-openapi's messages), keep status and spec apart
under the status subresource, scale through the scale subresource, are listed, selected, watched and shown in
Tables with the CRD's printer columns, and are deleted with their CRD.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from pathlib import Path
from typing import Any

import orjson
from aiohttp.test_utils import TestClient

from kubelite.apiserver.nesting import MAX_DEPTH
from kubelite.store.sqlite import SQLiteStore
from tests.api.test_rest import call
from tests.conftest import serving, serving_server

Client = TestClient  # type: ignore[type-arg]
Obj = dict[str, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
SCHEMA: Obj = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0, "default": 1},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "selector": {"type": "string"}}},
    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"},
                                                "phase": {"type": "string"}}}}}


def widget_crd(**version: Any) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": SCHEMA},
                                   "subresources": {"status": {}, "scale": {
                                       "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                       "labelSelectorPath": ".status.selector"}},
                                   "additionalPrinterColumns": [
                                       {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                                       {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                                       {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                                   **version}]}}


def widget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


async def established(api: Client, name: str, want: str = "True") -> Obj:
    """The CRD once its Established condition is `want` (the serving controller works asynchronously)."""
    for _ in range(200):
        crd = await call(api, "GET", f"{CRDS}/{name}", expect=200)
        conditions = {c["type"]: c for c in (crd.get("status") or {}).get("conditions") or []}
        if conditions.get("Established", {}).get("status") == want:
            return crd
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} never became Established={want}: {crd.get('status')}")


async def gone(api: Client, path: str) -> None:
    for _ in range(200):
        resp = await api.get(path)
        if resp.status == 404:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} still served")


async def with_widgets(api: Client, **version: Any) -> Obj:
    await call(api, "POST", CRDS, widget_crd(**version), expect=201)
    return await established(api, "widgets.example.com")


async def test_a_crd_is_established_with_its_names_accepted(api: Client) -> None:
    crd = await with_widgets(api)
    status = crd["status"]
    assert status["acceptedNames"] == {"plural": "widgets", "singular": "widget", "kind": "Widget",
                                       "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"]}
    assert status["storedVersions"] == ["v1"]
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons == {"NamesAccepted": ("True", "NoConflicts"), "Established": ("True", "InitialNamesAccepted")}
    assert crd["spec"]["conversion"] == {"strategy": "None"} and crd["metadata"]["generation"] == 1


async def test_custom_resource_crud(api: Client) -> None:
    await with_widgets(api)
    created = await call(api, "POST", WIDGETS, widget("a", color="red"), expect=201)
    assert created["spec"] == {"color": "red", "replicas": 1}  # defaulted
    assert created["metadata"]["generation"] == 1 and created["apiVersion"] == "example.com/v1"
    assert await call(api, "GET", f"{WIDGETS}/a", expect=200) == created
    body = copy.deepcopy(created)
    body["spec"]["replicas"] = 3
    updated = await call(api, "PUT", f"{WIDGETS}/a", body, expect=200)
    assert updated["metadata"]["generation"] == 2
    merged = await call(api, "PATCH", f"{WIDGETS}/a", {"spec": {"color": "blue"}}, "application/merge-patch+json",
                        expect=200)
    assert merged["spec"] == {"color": "blue", "replicas": 3} and merged["metadata"]["generation"] == 3
    patched = await call(api, "PATCH", f"{WIDGETS}/a", [{"op": "replace", "path": "/spec/replicas", "value": 4}],
                         "application/json-patch+json", expect=200)
    assert patched["spec"]["replicas"] == 4
    refused = await call(api, "PATCH", f"{WIDGETS}/a", {"spec": {}}, "application/strategic-merge-patch+json",
                         expect=415)
    assert refused["reason"] == "UnsupportedMediaType"
    await call(api, "DELETE", f"{WIDGETS}/a", expect=200)
    await call(api, "GET", f"{WIDGETS}/a", expect=404)


async def test_lists_select_by_label_and_field_and_delete_collection(api: Client) -> None:
    await with_widgets(api)
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        obj = widget(name)
        obj["metadata"]["labels"] = {"tier": tier}
        await call(api, "POST", WIDGETS, obj, expect=201)
    listed = await call(api, "GET", f"{WIDGETS}?labelSelector=tier%3Dweb", expect=200)
    assert listed["kind"] == "WidgetList" and [o["metadata"]["name"] for o in listed["items"]] == ["a", "c"]
    by_name = await call(api, "GET", "/apis/example.com/v1/widgets?fieldSelector=metadata.name%3Db", expect=200)
    assert [o["metadata"]["name"] for o in by_name["items"]] == ["b"]
    await call(api, "DELETE", f"{WIDGETS}?labelSelector=tier%3Dweb", expect=200)
    left = await call(api, "GET", WIDGETS, expect=200)
    assert [o["metadata"]["name"] for o in left["items"]] == ["b"]


async def test_watch_sees_custom_resources(api: Client) -> None:
    await with_widgets(api)
    resp = await api.get(f"{WIDGETS}?watch=1&timeoutSeconds=5")
    await call(api, "POST", WIDGETS, widget("w"), expect=201)
    line = await asyncio.wait_for(resp.content.readline(), 5)
    event = orjson.loads(line)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w")
    resp.close()


async def test_status_subresource_keeps_spec_and_status_apart(api: Client) -> None:
    await with_widgets(api)
    obj = widget("s", replicas=2)
    obj["status"] = {"phase": "Ignored"}
    created = await call(api, "POST", WIDGETS, obj, expect=201)
    assert "status" not in created
    status = await call(api, "PATCH", f"{WIDGETS}/s/status", {"status": {"phase": "Ready"}, "spec": {"replicas": 9}},
                        "application/merge-patch+json", expect=200)
    assert status["status"] == {"phase": "Ready"} and status["spec"]["replicas"] == 2
    assert status["metadata"]["generation"] == 1  # a status change is no new generation
    main = await call(api, "PATCH", f"{WIDGETS}/s", {"status": {"phase": "Lost"}}, "application/merge-patch+json",
                      expect=200)
    assert main["status"] == {"phase": "Ready"}


async def test_schema_errors_are_422s_with_upstream_causes(api: Client) -> None:
    await with_widgets(api)
    out = await call(api, "POST", WIDGETS, widget("bad", replicas="string", color="green"), expect=422)
    assert out["message"] == (
        'Widget.example.com "bad" is invalid: [spec.replicas: Invalid value: "string": spec.replicas in body must '
        'be of type integer: "string", spec.color: Unsupported value: "green": supported values: "red", "blue"]')
    assert [(c["reason"], c["field"]) for c in out["details"]["causes"]] == [
        ("FieldValueTypeInvalid", "spec.replicas"), ("FieldValueNotSupported", "spec.color")]


async def test_unknown_fields_are_pruned_with_warnings_or_refused_when_strict(api: Client) -> None:
    await with_widgets(api)
    resp = await api.post(WIDGETS, data=orjson.dumps(widget("p", junk=1)), headers={"Content-Type": "application/json"})
    assert resp.status == 201
    assert (await resp.json())["spec"] == {"replicas": 1}
    assert resp.headers.getall("Warning") == ['299 - "unknown field \\"spec.junk\\""']
    out = await call(api, "POST", f"{WIDGETS}?fieldValidation=Strict", widget("q", junk=1), expect=400)
    assert out["message"] == 'Widget in version "v1" cannot be handled as a Widget: strict decoding error: ' \
                             'unknown field "spec.junk"'


async def test_scale_subresource(api: Client) -> None:
    await with_widgets(api)
    await call(api, "POST", WIDGETS, widget("sc", replicas=2), expect=201)
    await call(api, "PATCH", f"{WIDGETS}/sc/status", {"status": {"replicas": 2, "selector": "app=sc"}},
               "application/merge-patch+json", expect=200)
    scale = await call(api, "GET", f"{WIDGETS}/sc/scale", expect=200)
    assert (scale["kind"], scale["spec"], scale["status"]) == ("Scale", {"replicas": 2},
                                                              {"replicas": 2, "selector": "app=sc"})
    await call(api, "PATCH", f"{WIDGETS}/sc/scale", {"spec": {"replicas": 5}}, "application/merge-patch+json",
               expect=200)
    assert (await call(api, "GET", f"{WIDGETS}/sc", expect=200))["spec"]["replicas"] == 5


async def test_printer_columns_with_filters_and_indexes(api: Client) -> None:
    """Operators' usual columns (cert-manager's, the Gateway API's): a condition picked by a filter, an index."""
    crd = widget_crd(additionalPrinterColumns=[
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "First", "type": "string", "jsonPath": ".spec.hosts[0]"}])
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    await call(api, "POST", CRDS, crd, expect=201)
    await established(api, "widgets.example.com")
    await call(api, "POST", WIDGETS, widget("w", hosts=["a.com", "b.com"]), expect=201)
    await call(api, "PATCH", f"{WIDGETS}/w/status", {"status": {"conditions": [  # the status subresource's
        {"type": "Scheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}},
               "application/merge-patch+json", expect=200)
    table = await (await api.get(WIDGETS, headers={"Accept": TABLE})).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Ready", "First"]
    assert table["rows"][0]["cells"] == ["w", "False", "a.com"]


async def test_tables_show_the_printer_columns(api: Client) -> None:
    await with_widgets(api)
    await call(api, "POST", WIDGETS, widget("t", replicas=3), expect=201)
    resp = await api.get(WIDGETS, headers={"Accept": TABLE})
    table = await resp.json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Phase", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["t", 3, None] and cells[3].endswith("s")


async def test_discovery_and_openapi_publish_the_resource(api: Client) -> None:
    await with_widgets(api)
    group = await call(api, "GET", "/apis/example.com", expect=200)
    assert group["preferredVersion"] == {"groupVersion": "example.com/v1", "version": "v1"}
    listing = await call(api, "GET", "/apis/example.com/v1", expect=200)
    assert [r["name"] for r in listing["resources"]] == ["widgets", "widgets/status", "widgets/scale"]
    resp = await api.get("/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;"
                                                     "as=APIGroupDiscoveryList"})
    items = {i["metadata"]["name"]: i for i in (await resp.json())["items"]}
    entry = items["example.com"]["versions"][0]["resources"][0]
    assert (entry["resource"], entry["shortNames"], entry["scope"]) == ("widgets", ["wd"], "Namespaced")
    index = await call(api, "GET", "/openapi/v3", expect=200)
    url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    doc = await call(api, "GET", url, expect=200)
    component = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert component["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget",
                                                             "version": "v1"}]
    assert component["properties"]["spec"] == SCHEMA["properties"]["spec"]


async def test_names_in_use_are_not_accepted(api: Client) -> None:
    await with_widgets(api)
    other = widget_crd()
    other["metadata"]["name"] = "gadgets.example.com"
    other["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Widget"}
    await call(api, "POST", CRDS, other, expect=201)
    crd = await established(api, "gadgets.example.com", "False")
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert (conditions["NamesAccepted"]["reason"], conditions["NamesAccepted"]["message"]) == \
        ("KindConflict", '"Widget" is already in use')
    assert conditions["Established"]["reason"] == "NotAccepted"
    await call(api, "GET", "/apis/example.com/v1/namespaces/default/gadgets", expect=404)
    await call(api, "DELETE", f"{CRDS}/widgets.example.com", expect=200)  # frees the kind: gadgets are accepted
    await established(api, "gadgets.example.com")
    await call(api, "GET", "/apis/example.com/v1/namespaces/default/gadgets", expect=200)
    builtin = widget_crd()
    builtin["metadata"] = {"name": "ingresses.networking.k8s.io",
                           "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}}
    builtin["spec"].update(group="networking.k8s.io", names={"plural": "ingresses", "kind": "MyIngress"})
    await call(api, "POST", CRDS, builtin, expect=201)
    crd = await established(api, "ingresses.networking.k8s.io", "False")
    assert {c["type"]: c["reason"] for c in crd["status"]["conditions"]}["NamesAccepted"] == "PluralConflict"


async def test_versions_with_conversion_none_rewrite_api_version(api: Client) -> None:
    crd = widget_crd()
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [{**v1, "name": "v1beta1", "storage": False}, v1]
    await call(api, "POST", CRDS, crd, expect=201)
    await established(api, "widgets.example.com")
    beta = "/apis/example.com/v1beta1/namespaces/default/widgets"
    created = await call(api, "POST", beta, {**widget("old"), "apiVersion": "example.com/v1beta1"}, expect=201)
    assert created["apiVersion"] == "example.com/v1beta1"
    assert (await call(api, "GET", f"{WIDGETS}/old", expect=200))["apiVersion"] == "example.com/v1"
    listed = await call(api, "GET", beta, expect=200)
    assert [o["apiVersion"] for o in listed["items"]] == ["example.com/v1beta1"]
    resp = await api.get(f"{beta}?watch=1&timeoutSeconds=5&resourceVersion={created['metadata']['resourceVersion']}")
    await call(api, "PATCH", f"{WIDGETS}/old", {"spec": {"replicas": 7}}, "application/merge-patch+json", expect=200)
    event = orjson.loads(await asyncio.wait_for(resp.content.readline(), 5))
    assert (event["type"], event["object"]["apiVersion"]) == ("MODIFIED", "example.com/v1beta1")
    resp.close()
    group = await call(api, "GET", "/apis/example.com", expect=200)
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    crd = await call(api, "GET", f"{CRDS}/widgets.example.com", expect=200)  # v1beta1 becomes the storage version
    crd["spec"]["versions"][0]["storage"], crd["spec"]["versions"][1]["storage"] = True, False
    watching = await api.get(f"{beta}?watch=1&timeoutSeconds=10")
    changed = await call(api, "PUT", f"{CRDS}/widgets.example.com", crd, expect=200)
    assert changed["status"]["storedVersions"] == ["v1", "v1beta1"]
    await asyncio.wait_for(watching.content.read(), 5)  # served anew: the open watches end
    # "old" was stored in v1, the storage version before: each version still shows it as its own
    assert (await call(api, "GET", f"{beta}/old", expect=200))["apiVersion"] == "example.com/v1beta1"
    assert (await call(api, "GET", f"{WIDGETS}/old", expect=200))["apiVersion"] == "example.com/v1"
    for _ in range(200):  # served again by the changed CRD: objects stored in v1 read in v1beta1 and back
        new = await call(api, "POST", WIDGETS, {**widget("new"), "metadata": {"generateName": "new-"}}, expect=201)
        if new["apiVersion"] == "example.com/v1" and \
                (await call(api, "GET", f"{beta}/{new['metadata']['name']}"))["apiVersion"] == "example.com/v1beta1":
            break
        await asyncio.sleep(0.02)
    assert (await call(api, "GET", f"{WIDGETS}/old", expect=200))["apiVersion"] == "example.com/v1"


async def test_cluster_scoped_custom_resources_with_their_list_kind(api: Client) -> None:
    crd = widget_crd()
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"]["listKind"] = "WidgetCollection"
    await call(api, "POST", CRDS, crd, expect=201)
    await established(api, "widgets.example.com")
    await call(api, "POST", "/apis/example.com/v1/widgets", widget("c"), expect=201)
    got = await call(api, "GET", "/apis/example.com/v1/widgets/c", expect=200)
    assert "namespace" not in got["metadata"]
    assert (await call(api, "GET", "/apis/example.com/v1/widgets", expect=200))["kind"] == "WidgetCollection"
    await call(api, "GET", f"{WIDGETS}/c", expect=404)


async def test_deleting_the_crd_deletes_its_resources_and_stops_serving_them(api: Client) -> None:
    await with_widgets(api)
    await call(api, "POST", WIDGETS, widget("x"), expect=201)
    held = widget("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await call(api, "POST", WIDGETS, held, expect=201)
    deleting = await call(api, "DELETE", f"{CRDS}/widgets.example.com", expect=200)
    assert deleting["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    await gone(api, f"{WIDGETS}/x")
    assert (await call(api, "GET", f"{WIDGETS}/held", expect=200))["metadata"]["deletionTimestamp"]
    await call(api, "GET", f"{CRDS}/widgets.example.com", expect=200)  # waits for the finalizer of its last resource
    refused = await call(api, "POST", WIDGETS, widget("late"), expect=405)
    assert refused["message"] == "create not allowed while custom resource definition is terminating"
    await call(api, "PATCH", f"{WIDGETS}/held", {"metadata": {"finalizers": None}}, "application/merge-patch+json",
               expect=200)
    await gone(api, f"{CRDS}/widgets.example.com")
    await gone(api, WIDGETS)
    listing = await api.get("/apis/example.com/v1")
    assert listing.status == 404


async def test_crds_are_followed_across_a_watch_cache_relist(tmp_path: Path) -> None:
    """A relist of the watch cache (its store watch compacted away) ends every watch, the controller's too: it
    watches again and syncs every CRD, so one created after the relist is still served."""
    async with serving_server(await SQLiteStore.open(tmp_path / "state.db")) as (server, api):
        await call(api, "POST", CRDS, widget_crd(), expect=201)
        await established(api, "widgets.example.com")
        await server.caches._relist()
        other = widget_crd()
        other["metadata"]["name"] = "gadgets.example.com"
        other["spec"]["names"] = {"plural": "gadgets", "kind": "Gadget"}
        await call(api, "POST", CRDS, other, expect=201)
        await established(api, "gadgets.example.com")
        await call(api, "POST", "/apis/example.com/v1/namespaces/default/gadgets",
                   {**widget("g"), "kind": "Gadget"}, expect=201)
        await call(api, "GET", f"{WIDGETS}", expect=200)


async def test_a_restarted_server_serves_its_crds_again(tmp_path: Path) -> None:
    async with serving(await SQLiteStore.open(tmp_path / "state.db")) as api:
        await with_widgets(api)
        await call(api, "POST", WIDGETS, widget("kept", replicas=2), expect=201)
    async with serving(await SQLiteStore.open(tmp_path / "state.db")) as api:
        assert (await call(api, "GET", f"{WIDGETS}/kept", expect=200))["spec"]["replicas"] == 2
        await call(api, "POST", WIDGETS, widget("new"), expect=201)


async def test_a_changed_crd_is_served_by_its_new_schema(api: Client) -> None:
    await with_widgets(api)
    await call(api, "POST", WIDGETS, widget("before", color="red"), expect=201)
    patch = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size",
              "value": {"type": "string", "default": "M"}}]
    changed = await call(api, "PATCH", f"{CRDS}/widgets.example.com", patch, "application/json-patch+json",
                         expect=200)
    assert changed["metadata"]["generation"] == 2
    for _ in range(200):
        created = await call(api, "POST", WIDGETS, {**widget("after"), "metadata": {"generateName": "after-"}},
                             expect=201)
        if created["spec"].get("size") == "M":
            break
        await asyncio.sleep(0.02)
    assert created["spec"] == {"replicas": 1, "size": "M"}
    before = await call(api, "GET", f"{WIDGETS}/before", expect=200)  # defaulted on read too
    assert before["spec"] == {"color": "red", "replicas": 1, "size": "M"}


async def test_metadata_is_typed_and_pruned_as_object_meta(api: Client) -> None:
    """Upstream decodes a custom resource's metadata into ObjectMeta: a wrong type is a 400, an unknown field is
    dropped (with fieldValidation's warning)."""
    await with_widgets(api)
    out = await call(api, "POST", WIDGETS, {**widget("m"), "metadata": {"name": "m", "labels": "x"}}, expect=400)
    assert out["message"] == 'Widget in version "v1" cannot be handled as a Widget: json: cannot unmarshal string ' \
                             "into Go struct field Widget.metadata.labels of type map[string]string"
    await call(api, "POST", WIDGETS, {**widget("n"), "metadata": {"name": 5}}, expect=400)
    resp = await api.post(WIDGETS, data=orjson.dumps({**widget("o"), "metadata": {"name": "o", "junk": 1}}),
                          headers={"Content-Type": "application/json"})
    assert resp.status == 201 and "junk" not in (await resp.json())["metadata"]
    assert resp.headers.getall("Warning") == ['299 - "unknown field \\"metadata.junk\\""']


MUTATION_VALUES: list[Any] = [True, False, 0, -1, 1.5, 2**40, "", "x", "object", "array", "string", {}, {"a": 1},
                              {"type": "integer", "default": "x"}, {"type": "bogus"}, [{"type": "object"}], "^(a",
                              {"type": "array", "items": {"type": "object", "properties": {
                                  "q": {"type": "integer", "default": 3}}}},
                              {"x-kubernetes-preserve-unknown-fields": True}]
MUTATED_KEYS = ["type", "items", "additionalProperties", "properties", "default", "enum", "required", "pattern",
                "minimum", "maxLength", "nullable", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource"]


def mutate(rnd: random.Random, value: Any, depth: int = 0) -> None:
    """One random change somewhere in `value`: a replaced, removed or added schema keyword or value."""
    if isinstance(value, dict) and value and depth < 12:
        key = rnd.choice(list(value))
        roll = rnd.random()
        if roll < 0.3:
            value[key] = copy.deepcopy(rnd.choice(MUTATION_VALUES))
        elif roll < 0.4:
            del value[key]
        elif roll < 0.55:
            value[rnd.choice(MUTATED_KEYS)] = copy.deepcopy(rnd.choice(MUTATION_VALUES))
        else:
            mutate(rnd, value[key], depth + 1)
    elif isinstance(value, list) and value:
        mutate(rnd, value[rnd.randrange(len(value))], depth + 1)


async def test_mangled_schemas_and_objects_are_client_errors(api: Client) -> None:
    """Hostile input: CRDs with randomly mangled schemas, and objects mangled alike for those accepted, are
    created or refused with a 4xx — never a 500 — and what is served stays readable (Tables included)."""
    rnd = random.Random(3)
    accepted = 0
    for i in range(40):
        crd = copy.deepcopy(widget_crd())
        crd["metadata"]["name"] = f"f{i}s.example.com"
        crd["spec"]["names"] = {"plural": f"f{i}s", "kind": f"F{i}"}
        for _ in range(rnd.randint(1, 3)):
            mutate(rnd, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        resp = await api.post(CRDS, data=orjson.dumps(crd), headers={"Content-Type": "application/json"})
        assert resp.status in (201, 400, 422), (resp.status, crd)
        if resp.status != 201:
            continue
        accepted += 1
        await established(api, crd["metadata"]["name"])
        path = f"/apis/example.com/v1/namespaces/default/f{i}s"
        for j in range(3):
            obj = {"apiVersion": "example.com/v1", "kind": f"F{i}", "metadata": {"name": f"o{j}"},
                   "spec": {"replicas": 1, "color": "red", "selector": "a"}}
            for _ in range(rnd.randint(0, 3)):
                mutate(rnd, obj)
            created = await api.post(path, data=orjson.dumps(obj), headers={"Content-Type": "application/json"})
            assert created.status < 500, (created.status, crd, obj)
        for sub in ("", "/o0", "/o0/scale"):
            read = await api.get(f"{path}{sub}", headers={"Accept": TABLE})
            assert read.status < 500
    assert accepted >= 5  # the table exercised served resources, not only refusals
    assert (await api.get("/openapi/v3/apis/example.com/v1")).status == 200


async def test_reads_show_defaults_added_after_an_object_was_written(api: Client) -> None:
    """Defaulting on read, as upstream's decoder of stored objects: a default added to the schema later shows in
    get, list and watch, though the stored object is not rewritten."""
    await with_widgets(api)
    stored = await call(api, "POST", WIDGETS, widget("old", color="red"), expect=201)
    patch = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size",
              "value": {"type": "string", "default": "M"}},
             {"op": "add", "path": "/spec/versions/0/additionalPrinterColumns/-",
              "value": {"name": "Size", "type": "string", "jsonPath": ".spec.size"}}]
    await call(api, "PATCH", f"{CRDS}/widgets.example.com", patch, "application/json-patch+json", expect=200)
    for _ in range(200):
        got = await call(api, "GET", f"{WIDGETS}/old", expect=200)
        if "size" in got["spec"]:
            break
        await asyncio.sleep(0.02)
    assert got["spec"] == {"color": "red", "replicas": 1, "size": "M"}
    assert got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # read, not rewritten
    assert (await call(api, "GET", WIDGETS, expect=200))["items"][0]["spec"]["size"] == "M"
    table = await (await api.get(WIDGETS, headers={"Accept": TABLE})).json()
    assert table["columnDefinitions"][-1]["name"] == "Size" and table["rows"][0]["cells"][-1] == "M"
    resp = await api.get(f"{WIDGETS}?watch=1&timeoutSeconds=5")
    event = orjson.loads(await asyncio.wait_for(resp.content.readline(), 5))
    assert (event["type"], event["object"]["spec"]["size"]) == ("ADDED", "M")
    resp.close()


def nested_schema(levels: int) -> Obj:
    """The widget schema with `levels` levels of `properties` under spec.deep."""
    deep: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    for _ in range(levels):
        deep = {"type": "object", "properties": {"a": deep}}
    out = copy.deepcopy(SCHEMA)
    out["properties"]["spec"]["properties"]["deep"] = deep
    return out


async def test_schemas_too_deep_for_the_openapi_document_are_refused(api: Client) -> None:
    """A schema ~190 levels of properties deep used to be stored and then fail /openapi/v3 with a 500 (orjson
    writes 254 levels at most), which breaks `kubectl apply` of every kind: it is refused with a 422, and one as
    deep as the bound admits is published, as are custom resources as deep as a request may nest."""
    crd = widget_crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = nested_schema(190)
    out = await call(api, "POST", CRDS, json.dumps(crd).encode(), expect=422)  # deeper than orjson writes
    assert out["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "spec.versions[0].schema.openAPIV3Schema",
        "message": "Forbidden: must not be nested more than 128 levels deep"}]
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = nested_schema(61)  # 5 + 2 * 61 = 127 levels
    await call(api, "POST", CRDS, crd, expect=201)
    await established(api, "widgets.example.com")
    doc = await call(api, "GET", "/openapi/v3/apis/example.com/v1", expect=200)
    assert doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"]["deep"] == \
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["deep"]
    await call(api, "GET", "/openapi/v3", expect=200)
    deep: Any = {"x": 1}
    for _ in range(MAX_DEPTH - 3):  # the object, spec and deep: as deep as a request may nest
        deep = {"a": deep}
    assert (await call(api, "POST", WIDGETS, json.dumps(widget("deep", deep=deep)).encode(), expect=201))[
        "spec"]["deep"] == deep
    assert (await call(api, "GET", f"{WIDGETS}/deep", expect=200))["spec"]["deep"] == deep
    assert (await call(api, "GET", WIDGETS, expect=200))["items"][0]["spec"]["deep"] == deep
    out = await call(api, "POST", WIDGETS, json.dumps(widget("deeper", deep={"a": deep})).encode(), expect=400)
    assert out["message"].endswith(f"exceeded max depth {MAX_DEPTH}")
