"""Hold off the CLI's SIGINT/SIGTERM while the main thread runs code an exception would corrupt.

Why: the CLI raises KeyboardInterrupt (or Terminated) from its signal handler, wherever the main
thread is. Raised inside `threading.Thread.start()` (while it waits for the new thread, holding a
Condition's lock), it left that lock released twice: the export died with "RuntimeError: release
unlocked lock" and exit 1 instead of its one line and exit 130 (tests/core/util/test_signals.py,
seen once in CI).

Contract: inside `shield()` (main thread; a no-op elsewhere) the CLI's handler calls `hold(signum)`
instead of raising; when the outermost shield ends, the held signal is sent again, so it raises
right there, at a safe point. `shielded()` says whether a shield is up.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_state = {"depth": 0, "held": None}


def shielded() -> bool:
    return _state["depth"] > 0


def hold(signum: int) -> None:
    _state["held"] = signum


@contextmanager
def shield() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        held = _state["held"] if not _state["depth"] else None
        if held is not None:
            _state["held"] = None
            signal.raise_signal(held)
