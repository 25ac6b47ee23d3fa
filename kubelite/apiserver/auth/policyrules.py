"""What the default policies are written with (plugin/pkg/auth/authorizer/rbac/bootstrappolicy's helpers): the
rule builders, API group names and the bootstrapping label and autoupdate annotation every default carries.
Shared by the default roles (bootstrappolicy) and the controllers' roles (controllerpolicy)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING_LABEL = ("kubernetes.io/bootstrapping", "rbac-defaults")
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = READ + WRITE
LEGACY, APPS, BATCH, POLICY = "", "apps", "batch", "policy"
RBAC_GROUP, AUTHZ, AUTHN = "rbac.authorization.k8s.io", "authorization.k8s.io", "authentication.k8s.io"
COORDINATION, CERTIFICATES, DISCOVERY = "coordination.k8s.io", "certificates.k8s.io", "discovery.k8s.io"
EVENTS, STORAGE, SCHEDULING = "events.k8s.io", "storage.k8s.io", "scheduling.k8s.io"
KUBELITE = "kubelite.io"  # kubelite's own group (the scheduler's SchedulingExplanations)


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def urls(verbs: list[str], paths: list[str]) -> Obj:
    return {"verbs": verbs, "nonResourceURLs": paths}


def event_rules() -> list[Obj]:
    return [rule(["create", "update", "patch"], [LEGACY, EVENTS], ["events"])]


def labelled(obj: Obj) -> Obj:
    """`obj` marked as a default: reconciled at every start unless annotated autoupdate "false"."""
    meta = obj["metadata"]
    meta["annotations"] = {AUTOUPDATE: "true", **(meta.get("annotations") or {})}
    meta["labels"] = {BOOTSTRAPPING_LABEL[0]: BOOTSTRAPPING_LABEL[1], **(meta.get("labels") or {})}
    return obj
