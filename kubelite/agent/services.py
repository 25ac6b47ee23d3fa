"""The narrow set of node services pod sync works against (instead of the whole Agent).

The Agent provides them for real; tests provide recording fakes. Keeping the seam this small is
what lets the hollow runtime run the same pod-sync code as the process runtime on a fake clock.
"""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol

from kubelite.agent.config import NodeConfig
from kubelite.agent.runtime.interface import Runtime
from kubelite.agent.volumes.manager import VolumeManager
from kubelite.clock import Clock

Obj = dict[str, Any]


class StatusWriter(Protocol):
    """The status manager's inputs (status_manager.StatusManager): they never block and never fail."""

    def set_status(self, pod: Obj, status: Obj) -> None: ...

    def delete_when_synced(self, pod: Obj) -> None: ...


class NodeServices(Protocol):
    @property
    def clock(self) -> Clock: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def host_ip(self) -> str: ...

    @property
    def base_env(self) -> dict[str, str]: ...

    @property
    def data_dir(self) -> Path: ...

    @property
    def status(self) -> StatusWriter: ...

    @property
    def volumes(self) -> VolumeManager:
        """API-data volumes (configMap, secret, downwardAPI, projected) and the objects env reads."""
        ...

    def event(self, pod: Obj, reason: str, message: str, kind: str = "Normal", field_path: str = "") -> None:
        """Record an event about the pod; `field_path` given: about that container of it (involvedObject.fieldPath)."""
        ...

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` in the background, owned by the node (a container's exit watcher, a probe kill)."""
        ...
