"""A Ctrl-C during start-up is never lost.

Until a command installs its own handling (`components.stop_on_signals`), SIGINT has Python's default handler,
which raises KeyboardInterrupt wherever the main thread is — and raised inside a callback (a weakref's, which
importlib runs during every import) it is printed as "Exception ignored" and dropped: the server then finished
starting and ran on, deaf to the Ctrl-C it had been sent (a CI run caught it, tests/e2e/test_shutdown.py). So the
interrupt is noted before it is raised, and `stop_on_signals` stops at once if one came before it took over.
"""

from __future__ import annotations

import signal
from types import FrameType

_seen = False


def _noted(signum: int, frame: FrameType | None) -> None:
    global _seen
    _seen = True
    raise KeyboardInterrupt


def note() -> None:
    """Note SIGINTs from now on (where SIGINT has Python's default handler: one ignored stays ignored)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _noted)


def seen() -> bool:
    """Whether a SIGINT came since `note`, raised or lost."""
    return _seen
