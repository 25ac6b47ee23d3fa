"""Which resources the API serves, read from discovery, for controllers that act on every kind.

The garbage collector and the namespace controller do not hard-code kinds: as upstream
(GetDeletableResources), they act on every served resource that can be listed, watched and
deleted — so a kind added to the API server later (batch/v1 Jobs) is collected too.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelite.client.interface import Client

NEEDED_VERBS = frozenset({"list", "watch", "delete"})


@dataclass(frozen=True)
class ApiResource:
    group_version: str  # "v1", "apps/v1"
    plural: str
    kind: str
    namespaced: bool

    def collection(self, namespace: str = "") -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace if self.namespaced else '')}/{name}"


async def deletable_resources(client: Client) -> list[ApiResource]:
    """Every served top-level resource (no subresources) in each group's preferred version that supports
    list, watch and delete."""
    versions = ["v1"]
    groups = await client.get("/apis")
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            versions.append(preferred)
    out: list[ApiResource] = []
    for gv in versions:
        listing = await client.get("/api/v1" if gv == "v1" else f"/apis/{gv}")
        for r in listing.get("resources") or []:
            if "/" in r["name"] or not set(r.get("verbs") or []) >= NEEDED_VERBS:
                continue
            out.append(ApiResource(gv, r["name"], r["kind"], bool(r.get("namespaced"))))
    return out
