"""The agent's checkpoint: what each pod worker runs, so that a restarted agent can take over.

One JSON file per pod, beside its logs, rewritten atomically whenever a container starts or
ends. It holds what the API object cannot: which process (pid and kernel start time) is which
container, restart counts, last exits and back-off state. A restarted agent re-adopts the
processes of pods it still runs and stops those of pods that are gone, so no process is
orphaned. The pod's directory is its identity: `<namespace>_<name>_<uid>`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import orjson

from kubelite.agent.runtime.interface import Handle, Runtime

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
FILE = "checkpoint.json"


def save(directory: Path, data: Obj) -> None:
    """Write atomically (a new file renamed over the old): a reader sees the old or the new checkpoint."""
    tmp = directory / f".{FILE}.tmp"
    try:
        tmp.write_bytes(orjson.dumps(data))
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(orjson.dumps(data))
    os.replace(tmp, directory / FILE)


def remove(directory: Path) -> None:
    (directory / FILE).unlink(missing_ok=True)


def load_all(pods_dir: Path) -> dict[str, tuple[Path, Obj]]:
    """Every pod's checkpoint by pod uid (an unreadable one is logged and skipped, never fatal)."""
    found: dict[str, tuple[Path, Obj]] = {}
    for path in sorted(pods_dir.glob(f"*/{FILE}")):
        try:
            data = json.loads(path.read_text())
            found[str(data["uid"])] = (path.parent, data)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
    return found


def recover(runtime: Runtime, container: Obj) -> Handle | None:
    """The process a container's checkpoint entry names: recorded by pid and start time, or — when
    the agent died between spawning it and recording it — found by the log path it was started for."""
    if container.get("process"):
        return runtime.adopt(container["process"])
    if container.get("starting"):
        return runtime.find(Path(container["starting"]))
    return None
