"""The two-way strategic merge patch between two pod statuses (upstream's strategicpatch.CreateTwoWayMergePatch,
as kubelet's PatchPodStatus → preparePatchBytesForPodStatus uses it).

Sending the whole new status as a strategic merge patch never deletes anything: a condition's `reason` and
`message` that the new status no longer has stayed on the object (conditions merge by type), so a pod whose
readiness probe began passing showed `Ready=True, reason: ContainersNotReady`. The diff names what changed
only, with `null` for a key that went away, `{"$patch": "delete", <key>: v}` for an element of a merged list
that went away, and `$setElementOrder/<list>` so that the server keeps the new order — and it is smaller
than the whole status, so cheaper to send, to decode and to merge.

Only the V1PodStatus lists that 1.32's types.go tags `patchStrategy:"merge"` are merged by key (the table
below, the same as kubelite/apiserver/patch_fields.py holds for the server); every other list (the container
statuses among them: types.go gives them no patch strategy) is atomic and sent whole when it changed.
Partial: elements of a merged list are diffed as flat maps of values (true of conditions and pod/host IPs);
a nested merged list inside them would be sent whole.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# V1PodStatus's lists merged by key (patch_fields.py; resourceClaimStatuses is never written by the agent)
MERGE_KEYS: dict[str, str] = {"conditions": "type", "hostIPs": "ip", "podIPs": "ip"}


def two_way_patch(original: Obj, modified: Obj, merge_keys: dict[str, str] = MERGE_KEYS) -> Obj:
    """The strategic merge patch turning `original` into `modified` (diffMaps of CreateTwoWayMergePatch);
    `merge_keys` names the top-level lists merged by key, all others are atomic."""
    patch: Obj = {}
    for key, new in modified.items():
        old = original.get(key, _ABSENT)
        if old == new:
            continue
        if key in merge_keys and isinstance(old, list) and isinstance(new, list):
            _diff_merged_list(key, old, new, merge_keys[key], patch)
        elif isinstance(old, dict) and isinstance(new, dict):
            patch[key] = two_way_patch(old, new, {})
        else:
            patch[key] = new
    for key in original:
        if key not in modified:
            patch[key] = None
    return patch


_ABSENT = object()


def _diff_merged_list(key: str, old: list[Any], new: list[Any], merge_key: str, patch: Obj) -> None:
    """diffListsOfMaps + the `$setElementOrder` directive: changed and added elements in the new list's
    order, then deletions; the order directive whenever the list's content or order changed."""
    before = {o.get(merge_key): o for o in old if isinstance(o, dict)}
    after = {n.get(merge_key) for n in new if isinstance(n, dict)}
    changes: list[Any] = []
    for element in new:
        previous = before.get(element.get(merge_key))
        if previous is None:
            changes.append(element)
        elif previous != element:
            changes.append({**two_way_patch(previous, element, {}), merge_key: element.get(merge_key)})
    changes += [{"$patch": "delete", merge_key: k} for k in sorted(before, key=str) if k not in after]
    order = [{merge_key: n.get(merge_key)} for n in new]
    if changes:
        patch[key] = changes
    if changes or order != [{merge_key: o.get(merge_key)} for o in old]:
        patch[f"$setElementOrder/{key}"] = order
