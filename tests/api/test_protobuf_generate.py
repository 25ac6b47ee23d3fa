"""The generator's parsing of upstream's .proto files and Go types, on excerpts of k8s.io/api."""

from __future__ import annotations

from kubelite.apiserver.proto.flags import INLINE, MAP, OMITEMPTY, POINTER, REPEATED
from kubelite.apiserver.proto.generate import closure, merge, parse_go, parse_proto

PROTO = """
syntax = "proto2";
package k8s.io.api.core.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";

message Volume {
  // name of the volume.
  optional string name = 1;
  optional VolumeSource volumeSource = 2;
}
message VolumeSource {
  optional EmptyDirVolumeSource emptyDir = 2;
}
message DeploymentLike {
  optional .k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional int32 replicas = 2;
  optional int32 minReadySeconds = 3;
  repeated string finalizers = 4;
  map<string, string> labels = 5;
}
"""

GO = """
type Volume struct {
	// name of the volume.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	VolumeSource `json:"" protobuf:"bytes,2,opt,name=volumeSource"`
}

type DeploymentLike struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,2,opt,name=replicas"`
	MinReadySeconds int32 `json:"minReadySeconds,omitempty" protobuf:"varint,3,opt,name=minReadySeconds"`
	Finalizers []string `json:"finalizers,omitempty" protobuf:"bytes,4,rep,name=finalizers"`
	Labels map[string]string `json:"labels,omitempty" protobuf:"bytes,5,rep,name=labels"`
	Internal string `json:"-" protobuf:"-"`
}

type ExtraValue []string
"""


def test_proto_and_go_merge_into_table_rows() -> None:
    package, messages = parse_proto(PROTO)
    assert package == "k8s.io.api.core.v1"
    go = parse_go(GO)
    assert go.kinds == {"DeploymentLike"} and go.slices == {"ExtraValue"}
    rows = merge(package, messages, go)
    assert rows["core.v1.Volume"] == ((1, "name", "string", 0, ""), (2, "", "core.v1.VolumeSource", INLINE, ""))
    assert rows["core.v1.DeploymentLike"] == (
        (1, "metadata", "meta.v1.ObjectMeta", OMITEMPTY, ""),
        (2, "replicas", "int32", POINTER | OMITEMPTY, ""),
        (3, "minReadySeconds", "int32", OMITEMPTY, ""),
        (4, "finalizers", "string", REPEATED | OMITEMPTY, ""),
        (5, "labels", "string", MAP | OMITEMPTY, "string"))
    assert rows["core.v1.VolumeSource"] == ((2, "emptyDir", "core.v1.EmptyDirVolumeSource", 0, ""),)


def test_closure_keeps_only_referenced_messages() -> None:
    messages = {"a.v1.A": ((1, "b", "b.v1alpha1.B", 0, ""),), "b.v1alpha1.B": ((1, "s", "string", 0, ""),),
                "b.v1alpha1.Unused": ()}
    assert closure({"a.v1.A"}, messages) == {"a.v1.A", "b.v1alpha1.B"}


def test_an_embedded_scalar_is_not_inlined() -> None:
    """metav1.Duration embeds time.Duration: a plain int64 field, not a struct to flatten."""
    package, messages = parse_proto("package k8s.io.apimachinery.pkg.apis.meta.v1;\n"
                                    "message Duration {\n  optional int64 duration = 1;\n}\n")
    go = parse_go('type Duration struct {\n'
                  '\ttime.Duration `protobuf:"varint,1,opt,name=duration,casttype=time.Duration"`\n}\n')
    assert merge(package, messages, go) == {"meta.v1.Duration": ((1, "", "int64", 0, ""),)}
