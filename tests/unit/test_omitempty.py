"""Go's omitempty on plain objects (kubelite/apiserver/omitempty.py) and the Go type reading that finds its fields
(scripts/go_structs.py, scripts/gen_omitempty_fields.py), on a small Go package written for each case."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from kubelite.apiserver.omitempty import omit_empty

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from gen_omitempty_fields import empty_when_zero
from go_structs import Universe

TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "i", "stdin": False, "ports": [
    {"containerPort": 80, "hostPort": 0}]}], "hostNetwork": False, "automountServiceAccountToken": False}}
TEMPLATE_OMITTED = {"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}],
                             "automountServiceAccountToken": False}}

# (model, object, the stored object it updates or None, what remains)
WALKS = [
    pytest.param("V1Deployment", {"spec": {"replicas": 0, "paused": False, "minReadySeconds": 0},
                                  "status": {"replicas": 0, "readyReplicas": 0, "conditions": []}}, None,
                 {"spec": {"replicas": 0}, "status": {}},
                 id="value fields empty are dropped, a pointer 0 and a struct value are kept"),
    pytest.param("V1Deployment", {"spec": {"template": TEMPLATE}}, None, {"spec": {"template": TEMPLATE_OMITTED}},
                 id="structs in lists of structs are walked"),
    pytest.param("V1Deployment", {"spec": {"template": TEMPLATE}, "status": {"readyReplicas": 0}},
                 {"spec": {"template": TEMPLATE}}, {"spec": {"template": TEMPLATE}, "status": {}},
                 id="a part equal to the stored object's is not walked"),
    pytest.param("V1Pod", {"spec": {"containers": [{"name": "a", "stdin": False}, {"name": "b", "stdin": False}]}},
                 {"spec": {"containers": [{"name": "a", "stdin": False}]}},
                 {"spec": {"containers": [{"name": "a", "stdin": False}, {"name": "b"}]}},
                 id="a list item equal to the stored one at its index is not walked"),
    pytest.param("", {"metadata": {"name": "x", "labels": {}}, "spec": {"empty": ""}}, None,
                 {"metadata": {"name": "x"}, "spec": {"empty": ""}}, id="a kind without a model: its metadata only"),
    pytest.param("V1ConfigMap", {"metadata": {"name": "x", "generation": 0, "finalizers": []}, "data": {},
                                 "immutable": False}, None,
                 {"metadata": {"name": "x"}, "immutable": False}, id="ObjectMeta's and a kind's own fields"),
]


@pytest.mark.parametrize(("model", "obj", "old", "want"), WALKS)
def test_omit_empty(model: str, obj: dict[str, Any], old: dict[str, Any] | None, want: dict[str, Any]) -> None:
    omit_empty(obj, model, old)
    assert obj == want


def test_shared_parts_are_replaced_not_changed() -> None:
    """Below the top, a part may be the stored object's: what has a field to drop is copied along its path."""
    template = copy.deepcopy(TEMPLATE)
    obj = {"spec": {"template": template}}
    omit_empty(obj, "V1Deployment")
    assert template == TEMPLATE and obj["spec"]["template"] is not template
    assert obj == {"spec": {"template": TEMPLATE_OMITTED}}
    untouched = {"spec": {"template": TEMPLATE_OMITTED}}
    inner = untouched["spec"]
    omit_empty(untouched, "V1Deployment")
    assert untouched["spec"] is inner  # nothing to drop: nothing copied


GO_PACKAGE = {
    "api/apps/v1/types.go": """package v1

import (
\tcorev1 "k8s.io/api/core/v1"
\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type Mode string

type Modes []Mode

// Thing has one field of each kind.
type Thing struct {
\tmetav1.TypeMeta `json:",inline"`
\tCount int32 `json:"count,omitempty"`
\tLimit *int32 `json:"limit,omitempty"`
\tMode Mode `json:"mode,omitempty"`
\tModes Modes `json:"modes,omitempty"`
\tLabels map[string]string `json:"labels,omitempty"`
\tWhen metav1.Time `json:"when,omitempty"`
\tProtocol corev1.Protocol `json:"protocol,omitempty"`
\tSpec corev1.PodSpec `json:"spec,omitempty"`
\tAny interface{} `json:"any,omitempty"`
\tInner `json:",inline"`
}

type Inner struct {
\tFlag bool `json:"flag,omitempty"`
}

type Alias = Inner
""",
    "api/core/v1/types.go": "package v1\n\ntype Protocol string\n\ntype PodSpec struct {\n}\n",
    "apimachinery/pkg/apis/meta/v1/types.go": """package v1

type TypeMeta struct {
\tKind string `json:"kind,omitempty"`
}
""",
    "apimachinery/pkg/apis/meta/v1/time.go": "package v1\n\nimport \"time\"\n\ntype Time struct {\n\ttime.Time\n}\n",
}
EMPTY_WHEN_ZERO = {"kind": True, "count": True, "limit": False, "mode": True, "modes": True, "labels": True,
                   "when": False, "protocol": True, "spec": False, "any": False, "flag": True}


@pytest.fixture
def universe(tmp_path: Path) -> Universe:
    for name, text in GO_PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return Universe(str(tmp_path / "api"), str(tmp_path / "apimachinery"))


@pytest.mark.parametrize(("field", "empty"), [pytest.param(f, e, id=f"{f}: {'omitted' if e else 'kept'} when zero")
                                              for f, e in EMPTY_WHEN_ZERO.items()])
def test_empty_when_zero(universe: Universe, field: str, empty: bool) -> None:
    """Inline embedding is flattened (TypeMeta from apimachinery, Inner in place); a named type is followed to
    its underlying type across packages; pointers, structs and interfaces are never empty but nil."""
    fields = {f.json: f for f in universe.fields(universe.package("k8s.io/api/apps/v1"), "Thing")}
    assert list(fields) == list(EMPTY_WHEN_ZERO)
    assert empty_when_zero(universe, fields[field].type) is empty


def test_alias_has_the_fields_of_its_struct(universe: Universe) -> None:
    package = universe.package("k8s.io/api/apps/v1")
    assert [f.json for f in universe.fields(package, "Alias")] == ["flag"]
