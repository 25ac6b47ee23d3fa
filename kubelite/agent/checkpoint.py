"""The agent's checkpoint: what each pod worker runs, so that a restarted agent can take over.

One JSON file per pod, beside its logs, rewritten atomically whenever a container starts or
ends. It holds what the API object cannot: which process (pid and kernel start time) is which
container, restart counts, last exits and back-off state. A restarted agent re-adopts the
processes of pods it still runs and stops those of pods that are gone, so no process is
orphaned. The pod's directory is its identity: `<namespace>_<name>_<uid>`.
"""

from __future__ import annotations

import contextlib
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
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC  # open(path, "wb")


def save(directory: Path, data: Obj) -> None:
    """Write atomically (a new file renamed over the old): a reader sees the old or the new checkpoint.

    With the os module's calls on string paths: a pod's checkpoint is written two or three times in its life,
    and `Path.write_bytes` (path objects, a buffered file object) cost about as much again as the system calls
    — a simulation's thousands of pods a minute. Same calls, same file (created 0o666 less the umask, truncated)."""
    base = os.fspath(directory)
    tmp = f"{base}/.{FILE}.tmp"
    payload = orjson.dumps(data)
    try:
        fd = os.open(tmp, WRITE_FLAGS, 0o666)
    except FileNotFoundError:  # the pod's first checkpoint: its directory is made with it
        os.makedirs(base, exist_ok=True)
        fd = os.open(tmp, WRITE_FLAGS, 0o666)
    try:
        view = memoryview(payload)
        while view:  # a regular file takes it whole; a short write is continued, as a buffered file would
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, f"{base}/{FILE}")


def remove(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"{os.fspath(directory)}/{FILE}")


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
