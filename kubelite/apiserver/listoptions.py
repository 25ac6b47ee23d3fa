"""ListOptions as kube-apiserver checks them before a read: their validation, the resourceVersion's parsing, and
the watch cache's wait for a resourceVersion it has not seen yet.

Mirrors apimachinery/pkg/apis/meta/internalversion/validation (ValidateListOptions, a 422 on
`ListOptions.meta.k8s.io`), apiserver/pkg/storage's APIObjectVersioner.ParseResourceVersion (a 400 for a
resourceVersion that is not an unsigned integer) and the cacher's waitUntilFreshAndBlock (up to 3 s, then a 504
"Too large resource version" the client retries).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelite.api import errors
from kubelite.api.errors import Cause
from kubelite.api.validation import forbidden, not_supported
from kubelite.apiserver.cache import Caches
from kubelite.apiserver.request import parse_bool
from kubelite.clock import Clock, bounded

FRESHNESS_WAIT = 3.0  # cacher's blockTimeout for a resourceVersion ahead of the cache
_MATCHES = ["Exact", "NotOlderThan", ""]
_MAX_UINT64 = 2**64 - 1


def send_initial_events(query: Mapping[str, str]) -> bool | None:
    """ListOptions.SendInitialEvents, a *bool: None when the query does not give it."""
    value = query.get("sendInitialEvents")
    return None if value is None else parse_bool(value, "sendInitialEvents")


def watch_options(query: Mapping[str, str], watch: bool) -> tuple[bool | None, str]:
    """sendInitialEvents and resourceVersionMatch after SetListOptionsDefaults (1.32's WatchList gate is on): a
    watch from resourceVersion "" or "0" that chose neither asks for the initial events, NotOlderThan."""
    initial, match = send_initial_events(query), query.get("resourceVersionMatch", "")
    if watch and initial is None and not match and query.get("resourceVersion", "") in ("", "0"):
        return True, "NotOlderThan"
    return initial, match


def validate(query: Mapping[str, str], watch: bool) -> bool:
    """ValidateListOptions, and validateWatchOptions for a watch (1.32, the WatchList gate on: kubelite serves
    sendInitialEvents, watch.open_stream), of the defaulted options; whether a watch sends initial events."""
    initial, match = watch_options(query, watch)
    causes: list[Cause] = []
    if watch:
        if initial is not None and match != "NotOlderThan":
            causes.append(forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch "
                                                            "to NotOlderThan"))
        if match:
            if initial is None:
                causes.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                                                                "sendInitialEvents is provided"))
            if match != "NotOlderThan":
                causes.append(not_supported("resourceVersionMatch", match, ["NotOlderThan"]))
            if query.get("continue"):
                causes.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                                                                "provided"))
    else:
        if match:
            rv = query.get("resourceVersion", "")
            if not rv:
                causes.append(forbidden("resourceVersionMatch",
                                        "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if query.get("continue"):
                causes.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                                                                "provided"))
            if match not in _MATCHES:
                causes.append(not_supported("resourceVersionMatch", match, _MATCHES))
            if match == "Exact" and rv == "0":
                causes.append(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for '
                                                                'resourceVersion "0"'))
        if initial is not None:
            causes.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid("ListOptions", "", causes, "meta.k8s.io")
    return bool(initial)


def parse_resource_version(text: str) -> int:
    """ParseResourceVersion: "" and "0" mean any (0); anything but an unsigned 64-bit integer is a 400."""
    if text in ("", "0"):
        return 0
    if not (text.isascii() and text.isdigit()):
        reason = "invalid syntax"
    elif int(text) > _MAX_UINT64:
        reason = "value out of range"
    else:
        return int(text)
    raise errors.bad_request(f'invalid resource version: resourceVersion: Invalid value: "{text}": '
                             f'strconv.ParseUint: parsing "{text}": {reason}')


async def wait_fresh(caches: Caches, clock: Clock, revision: int) -> None:
    """Wait (up to FRESHNESS_WAIT) until the watch cache has seen `revision`; else the cacher's 504."""
    if revision > caches.revision:
        fresh, _ = await bounded(clock, caches.wait_for(revision), FRESHNESS_WAIT, coarse=True)
        if not fresh:
            raise errors.too_large_resource_version(revision, caches.revision)
