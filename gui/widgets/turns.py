"""`later(receiver, fn)`: run `fn` in an event-loop turn of its own, after the timers and the
input that are due by then.

Why not `QTimer.singleShot(0, ...)`: in Qt 6 that posts an event, and Qt delivers posted events
in passes that run back to back with the pass that posted them, before it looks at timers or
input. Work split with it still freezes the window for the sum of its parts; chained with a
timer, for one part at a time (docs/performance.md). A job's end (its result and `finished` arrive as posted events too) shows its
result in stages with this, each stage with its own layout and paint.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

LATER_MS = 1  # a real timer: it waits its turn behind the timers and input already due


def later(receiver: QObject, fn: Callable[[], object]) -> None:
    """`fn()` in a later turn; never if `receiver` is deleted first."""
    QTimer.singleShot(LATER_MS, receiver, fn)
