"""Helpers for driving pods through kubectl in the agent's end-to-end tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import ServerProcess


def apply_pod(c: ServerProcess, name: str, containers: list[dict[str, Any]], **spec: Any) -> None:
    c.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers, **spec}}))


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def get_pod(c: ServerProcess, name: str) -> dict[str, Any]:
    res = c.kubectl("get", "pod", name, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def wait_for(predicate: Callable[[], bool], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def pod_phase(c: ServerProcess, name: str) -> str:
    return str(get_pod(c, name).get("status", {}).get("phase", ""))


def container_status(c: ServerProcess, name: str, container: str) -> dict[str, Any]:
    st = get_pod(c, name).get("status", {})
    for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or []):
        if cs["name"] == container:
            return dict(cs)
    return {}
