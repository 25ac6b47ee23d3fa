"""Which resources the API serves, read from discovery, for controllers that act on every kind.

The garbage collector and the namespace controller do not hard-code kinds: as upstream
(GetDeletableResources), they act on every served resource that can be listed, watched and
deleted — so a kind added to the API server later (batch/v1 Jobs) is collected too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubelite.api.errors import ApiError
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

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]

    def gvr(self) -> str:
        """schema.GroupVersionResource's String(): `apps/v1, Resource=deployments`, `/v1, Resource=pods`."""
        version = self.group_version.rpartition("/")[2]
        return f"{self.group}/{version}, Resource={self.plural}"


@dataclass
class Discovery:
    """What discovery found, and what it could not read (the namespace deleter reports both as conditions)."""

    resources: list[ApiResource] = field(default_factory=list)
    error: str = ""  # discovery as a whole failed (the group list could not be read)
    failed: dict[str, str] = field(default_factory=dict)  # group version → why its listing failed
    unparsable: list[str] = field(default_factory=list)  # group versions schema.ParseGroupVersion refuses


async def _preferred_versions(client: Client) -> list[str]:
    versions = ["v1"]
    groups = await client.get("/apis")
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            versions.append(preferred)
    return versions


def _deletable(gv: str, listing: dict[str, Any]) -> list[ApiResource]:
    """The top-level resources (no subresources) of one group version that support list, watch and delete."""
    return [ApiResource(gv, r["name"], r["kind"], bool(r.get("namespaced"))) for r in listing.get("resources") or []
            if "/" not in r["name"] and set(r.get("verbs") or []) >= NEEDED_VERBS]


def _listing_path(gv: str) -> str:
    return "/api/v1" if gv == "v1" else f"/apis/{gv}"


async def deletable_resources(client: Client) -> list[ApiResource]:
    """Every served top-level resource in each group's preferred version that supports list, watch and delete;
    any discovery failure raises (the garbage collector retries discovery as a whole)."""
    out: list[ApiResource] = []
    for gv in await _preferred_versions(client):
        out.extend(_deletable(gv, await client.get(_listing_path(gv))))
    return out


async def discover_deletable(client: Client) -> Discovery:
    """deletable_resources as the namespace deleter reads it: a group version whose listing fails is left out and
    reported (discovery.ErrGroupDiscoveryFailed), so the others are still emptied; a group version that does not
    parse (more than one "/") is reported, and then — as discovery.GroupVersionResources returns no resources
    with its error — no resource is."""
    found = Discovery()
    try:
        versions = await _preferred_versions(client)
    except ApiError as exc:
        found.error = exc.message
        return found
    for gv in versions:
        if gv.count("/") > 1:
            found.unparsable.append(gv)
            continue
        try:
            found.resources.extend(_deletable(gv, await client.get(_listing_path(gv))))
        except ApiError as exc:
            found.failed[gv] = exc.message
    if found.unparsable:
        found.resources = []
    return found
