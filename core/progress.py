"""Progress reporting and cooperative cancellation for long core operations.

Every long operation takes ``progress: ProgressFn | None`` and ``cancel: CancelToken | None``.
The core never prints; the CLI turns progress into a stderr line and the app into a signal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import Cancelled

# progress(fraction in [0, 1] or None when unknown, short message)
ProgressFn = Callable[[float | None, str], None]


class CancelToken:
    """A flag a job checks between steps; set from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise `Cancelled` if cancellation was requested."""
        if self._event.is_set():
            raise Cancelled()


class Reporter:
    """Convenience wrapper: report(fraction, message) and check cancellation in one call."""

    def __init__(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> None:
        self._progress = progress
        self._cancel = cancel

    def __call__(self, fraction: float | None, message: str) -> None:
        if self._cancel is not None:
            self._cancel.check()
        if self._progress is not None:
            self._progress(fraction, message)

    def check(self) -> None:
        if self._cancel is not None:
            self._cancel.check()

    def finished(self, message: str = "done") -> None:
        """Report completion without checking for cancel: once the result exists (a file renamed
        into place), a late cancel must not turn success into "cancelled"."""
        if self._progress is not None:
            self._progress(1.0, message)

    def sub(self, start: float, end: float) -> Reporter:
        """A reporter mapping [0, 1] onto [start, end] of this one."""
        parent = self

        def scaled(fraction: float | None, message: str) -> None:
            parent(None if fraction is None else start + (end - start) * fraction, message)

        return Reporter(scaled, self._cancel)
