"""The WebSocket channel protocol of exec and attach (k8s.io/apimachinery/pkg/util/httpstream/wsstream).

Every binary message starts with its channel's number: stdin 0, stdout 1, stderr 2, the error
channel 3 (one Status JSON at the end: Success, or NonZeroExitCode with the code in
details.causes reason ExitCode), resize 4 (JSON `{"Width": w, "Height": h}`). v5 adds channel 255
to close a stream (the client's stdin EOF: payload `[0]`). kubectl v1.32 offers v5 then v4.
"""

from __future__ import annotations

from typing import Any

import orjson

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
PROTOCOLS = (V5, V4)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def frame(channel: int, data: bytes) -> bytes:
    return bytes([channel]) + data


def exit_status(code: int) -> bytes:
    """The error channel's last word about a command that ended with `code` (kubelet's ServeExec)."""
    if code == 0:
        return orjson.dumps({"metadata": {}, "status": "Success"})
    status: dict[str, Any] = {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    return orjson.dumps(status)


def failure(message: str) -> bytes:
    """The error channel's word about a command that could not run at all."""
    return orjson.dumps({"metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
                         "message": f"error executing command in container: {message}"})


def resize(payload: bytes) -> tuple[int, int] | None:
    """(width, height) from a resize message, None for a malformed one (ignored, as kubelet)."""
    try:
        size = orjson.loads(payload)
        width, height = int(size.get("Width", 0)), int(size.get("Height", 0))
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return None
    if not (0 < width < 65536 and 0 < height < 65536):
        return None
    return width, height
