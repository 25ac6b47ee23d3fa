"""Template and revision equality: upstream's TestEqualIgnoreHash (deployment_util_test.go) by case name, then the
semantic rules a dict needs that Go structs have for free (null and absent alike, empty and absent alike), for
Deployments (EqualIgnoreHash) and StatefulSets (history.EqualRevision)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubelite.controllers import statefulset_utils as su
from kubelite.controllers.gojson import omit_empty, semantic
from kubelite.controllers.revisions import equal_ignore_hash

Obj = dict[str, Any]
HASH = "pod-template-hash"


def template(name: str, node: str, annotations: dict[str, str], labels: dict[str, str]) -> Obj:
    """generatePodTemplateSpec."""
    return {"metadata": {"name": name, "annotations": annotations, "labels": labels}, "spec": {"nodeName": node}}


@pytest.mark.parametrize(("former", "latter", "expected"), [
    pytest.param(template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
                 template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}), True,
                 id="Same spec, same labels"),
    pytest.param(template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
                 template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}), True,
                 id="Same spec, only pod-template-hash label value is different"),
    pytest.param(template("foo", "foo-node", {}, {"something": "else"}),
                 template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}), True,
                 id="Same spec, the former doesn't have pod-template-hash label"),
    pytest.param(template("foo", "foo-node", {}, {"something": "else"}),
                 template("foo", "foo-node", {}, {HASH: "value-2"}), False,
                 id="Same spec, the label is different, the former doesn't have pod-template-hash label, "
                    "same number of labels"),
    pytest.param(template("foo", "foo-node", {}, {HASH: "value-1"}),
                 template("foo", "foo-node", {}, {"something": "else"}), False,
                 id="Same spec, the label is different, the latter doesn't have pod-template-hash label, "
                    "same number of labels"),
    pytest.param(template("foo", "foo-node", {}, {HASH: "value-1"}),
                 template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}), False,
                 id="Same spec, the label is different, and the pod-template-hash label value is the same"),
    pytest.param(template("foo", "foo-node", {"former": "value"}, {HASH: "value-1", "something": "else"}),
                 template("foo", "foo-node", {"latter": "value"}, {HASH: "value-1", "something": "else"}), False,
                 id="Different spec, same labels"),
    pytest.param(template("foo-1", "foo-node", {}, {HASH: "value-1", "something": "else"}),
                 template("foo-2", "foo-node", {}, {HASH: "value-2", "something": "else"}), False,
                 id="Different spec, different pod-template-hash label value"),
    pytest.param(template("foo-1", "foo-node-1", {}, {"something": "else"}),
                 template("foo-2", "foo-node-2", {}, {HASH: "value-2", "something": "else"}), False,
                 id="Different spec, the former doesn't have pod-template-hash label"),
    pytest.param(template("foo", "foo-node-1", {}, {"something": "else"}),
                 template("foo", "foo-node-2", {}, {"nothing": "else"}), False,
                 id="Different spec, different labels"),
])
def test_equal_ignore_hash(former: Obj, latter: Obj, expected: bool) -> None:
    """TestEqualIgnoreHash: either way round, and neither template's labels are changed."""
    for t1, t2 in ((former, latter), (latter, former)):
        before = copy.deepcopy((t1, t2))
        assert equal_ignore_hash(t1, t2) is expected
        assert (t1, t2) == before


ROLLED_OUT: Obj = {"metadata": {"labels": {"app": "web", HASH: "648585dd48"}},
                   "spec": {"containers": [{"name": "busybox", "image": "busybox", "resources": {}}],
                            "securityContext": {}, "restartPolicy": "Always"}}


def _changed(change: Any) -> Obj:
    out = copy.deepcopy(ROLLED_OUT)
    change(out)
    return out


@pytest.mark.parametrize(("other", "expected"), [
    pytest.param(_changed(lambda t: t["metadata"].update(creationTimestamp=None)), True,
                 id="creationTimestamp null (kubectl rollout undo) equals an absent one"),
    pytest.param(_changed(lambda t: t["metadata"].update(creationTimestamp=None, annotations={})), True,
                 id="empty annotations equal absent ones (a nil and an empty map are equal)"),
    pytest.param(_changed(lambda t: t["spec"]["containers"][0].update(env=[], args=None)), True,
                 id="an empty list and a null list equal absent ones"),
    pytest.param(_changed(lambda t: t["spec"].update(nodeSelector={})), True,
                 id="an empty nodeSelector map equals an absent one"),
    pytest.param(_changed(lambda t: t["spec"].pop("securityContext")), False,
                 id="an empty securityContext (a pointer to an empty struct) differs from none"),
    pytest.param(_changed(lambda t: t["spec"].update(volumes=[{"name": "v", "emptyDir": {}}])), False,
                 id="an emptyDir volume differs from no volume"),
    pytest.param(_changed(lambda t: t["spec"]["containers"][0].update(image="busybox:1.36")), False,
                 id="another image differs"),
])
def test_equal_ignore_hash_is_semantic(other: Obj, expected: bool) -> None:
    without_hash = copy.deepcopy(other)
    del without_hash["metadata"]["labels"][HASH]
    for t1, t2 in ((ROLLED_OUT, without_hash), (without_hash, ROLLED_OUT)):
        assert equal_ignore_hash(t1, t2) is expected


def _revision(set_template: Obj, hash_label: str | None = None) -> Obj:
    set_ = {"metadata": {"name": "web", "namespace": "default", "uid": "u"}, "spec": {"template": set_template}}
    rev = su.new_revision(set_, 1, None)
    if hash_label is not None:
        rev["metadata"]["labels"][su.HASH_LABEL] = hash_label
    return rev


SET_TEMPLATE: Obj = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


@pytest.mark.parametrize(("a", "b", "expected"), [
    pytest.param(_revision(SET_TEMPLATE), _revision(SET_TEMPLATE), True, id="same template"),
    pytest.param(_revision(SET_TEMPLATE),
                 _revision({**SET_TEMPLATE, "metadata": {**SET_TEMPLATE["metadata"], "creationTimestamp": None}}),
                 True, id="creationTimestamp null equals an absent one"),
    pytest.param(_revision(SET_TEMPLATE), _revision({**SET_TEMPLATE, "spec": {"containers": [{"name": "c"}]}}),
                 False, id="another template differs"),
    pytest.param(_revision(SET_TEMPLATE, "bcd2f"), _revision(SET_TEMPLATE, "x5c7d"), True,
                 id="safe-encoded hash labels are not compared (ParseInt fails on them)"),
    pytest.param(_revision(SET_TEMPLATE, "1234"), _revision(SET_TEMPLATE, "4321"), False,
                 id="decimal hash labels that differ make revisions differ"),
])
def test_equal_revision(a: Obj, b: Obj, expected: bool) -> None:
    """history.EqualRevision, either way round."""
    assert su.equal_revision(a, b) is expected
    assert su.equal_revision(b, a) is expected


@pytest.mark.parametrize(("obj", "fields", "want"), [
    pytest.param({"replicas": 0, "readyReplicas": 2, "conditions": []}, {"replicas", "conditions"},
                 {"readyReplicas": 2}, id="zero values of omitempty fields are left out"),
    pytest.param({"ready": 0, "terminating": 0}, {"active"}, {"ready": 0, "terminating": 0},
                 id="fields not named (pointers upstream) keep their zero"),
    pytest.param({"completedIndexes": "", "failed": 1}, {"completedIndexes", "failed"}, {"failed": 1},
                 id="an empty string is a zero value, a count of one is not"),
])
def test_omit_empty(obj: Obj, fields: set[str], want: Obj) -> None:
    assert omit_empty(obj, fields) == want


def test_semantic_keeps_what_go_tells_apart() -> None:
    """Zero scalars and empty pointer structs stay: only nulls, empty lists and empty maps/value structs go."""
    value = {"a": 0, "b": "", "c": False, "securityContext": {}, "metadata": {"creationTimestamp": None},
             "items": [None, {"labels": {}}]}
    assert semantic(value) == {"a": 0, "b": "", "c": False, "securityContext": {}, "items": [None, {}]}


@pytest.mark.parametrize(("annotation", "want"), [
    pytest.param("3", 3, id="a revision"),
    pytest.param("²", 0, id="a superscript digit (str.isdigit() is true, int() raises) counts as none"),
    pytest.param("1_0", 0, id="an underscore Python's int() takes counts as none"),
    pytest.param(" 3", 0, id="surrounding space counts as none, as ParseInt's"),
    pytest.param("99999999999999999999", 0, id="beyond int64 counts as none"),
])
def test_revision_is_parsed_as_upstreams_parse_int(annotation: str, want: int) -> None:
    """deploymentutil.Revision: strconv.ParseInt; a value it cannot parse is no revision, never a failing sync."""
    from kubelite.controllers import rollout as ro
    from kubelite.controllers.revisions import revision

    assert revision({"metadata": {"annotations": {ro.REVISION: annotation}}}) == want


@pytest.mark.parametrize("label", ["²", "1_0", "99999999999"])
def test_equal_revision_ignores_a_hash_label_parse_int_refuses(label: str) -> None:
    """Controllerrevision's hash labels compared only where ParseInt(…, 10, 32) reads both (upstream EqualRevision)."""
    a = {"metadata": {"labels": {su.HASH_LABEL: label}}, "data": {"x": 1}}
    b = {"metadata": {"labels": {su.HASH_LABEL: "7"}}, "data": {"x": 1}}
    assert su.equal_revision(a, b)
