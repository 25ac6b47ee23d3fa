"""Events as `kubectl describe` shows them: a repeated event is one row with a count ("x4 over 2m")."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, get_pod, sh, wait_for

pytestmark = pytest.mark.e2e


def _restarts(up: ServerProcess, name: str) -> int:
    statuses = get_pod(up, name).get("status", {}).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount", 0))


def test_repeated_container_events_are_counted_not_repeated(up: ServerProcess) -> None:
    apply_pod(up, "flaky", [sh("app", "sleep 0.2; exit 1")])
    assert wait_for(lambda: _restarts(up, "flaky") >= 3, timeout=60), get_pod(up, "flaky").get("status")
    events = json.loads(up.kubectl("get", "events", "--field-selector", "involvedObject.name=flaky",
                                   "-o", "json").stdout)["items"]
    by_reason: dict[str, list[dict[str, object]]] = {}
    for ev in events:
        by_reason.setdefault(str(ev["reason"]), []).append(ev)
    for reason in ("Pulled", "Created", "Started"):
        assert len(by_reason[reason]) == 1, by_reason[reason]  # one Event, counted
        [event] = by_reason[reason]
        assert int(str(event["count"])) >= 3
        assert event["firstTimestamp"] != event["lastTimestamp"]
    # GenerateContainerRef: the container's events name it, and the field selector kubectl offers finds them
    about_app = json.loads(up.kubectl("get", "events", "--field-selector",
                                      "involvedObject.name=flaky,involvedObject.fieldPath=spec.containers{app}",
                                      "-o", "json").stdout)["items"]
    assert {"Pulled", "Created", "Started", "BackOff"} <= {str(ev["reason"]) for ev in about_app}, about_app
    described = up.kubectl("describe", "pod", "flaky").stdout
    assert re.search(r"\(x\d+ over \d+s\)\s+kubelet\s+Started", described), described
    up.kubectl("delete", "pod", "flaky", "--grace-period=0", "--force", check=False)
