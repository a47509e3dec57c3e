"""One mechanism for every core job the app runs: a QRunnable whose signals live on a QObject.

Why: the GUI thread never blocks. A job is a plain core function `fn(progress, cancel)`;
`Job.start()` runs it on the app's thread pool and emits, on the GUI thread:
- `started()`;
- `progress(fraction_or_None, message)`, throttled to ~20 per second;
- `returned(result)`, or `errored(exc, traceback_text)` (every exception is caught and emitted,
  never lost: one nobody listens for, a quiet side job's, goes to the error log), or
  `cancelled(text)` for a `Cancelled` (its line: what stayed written, if anything);
- `finished()` always, last.
Cancel is cooperative: `Job.cancel()` sets the core `CancelToken`; the core raises `Cancelled` and
cleans up (no partial file). Once the job passes its commit point (`Job.committed`) a cancel is
ignored and the job ends with `returned(result)`: the file was written, and the window says so.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import SIGNAL, QObject, QRunnable, QThreadPool, Signal

from onnxport.core.util.error_log import log_error
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken, Throttle

ERRORED = "errored(PyObject,QString)"  # JobSignals.errored, as Qt names it
JobFn = Callable[[Callable[[float | None, str], None], CancelToken], Any]


class JobSignals(QObject):
    started = Signal()
    progress = Signal(object, str)
    returned = Signal(object)
    errored = Signal(object, str)
    cancelled = Signal(str)
    finished = Signal()


class Job(QRunnable):
    """A core function run in the thread pool; see the module docstring."""

    def __init__(self, fn: JobFn, name: str = "job") -> None:
        super().__init__()
        self.setAutoDelete(False)  # the runner keeps a reference; Qt must not delete it under us
        self.fn = fn
        self.name = name
        self.token = CancelToken()
        self.signals = JobSignals()
        self._progress = Throttle(lambda fraction, message: self._emit(self.signals.progress, fraction, message))
        self.running = False

    def start(self, pool: QThreadPool | None = None) -> Job:
        self.running = True
        (pool or QThreadPool.globalInstance()).start(self)
        return self

    def cancel(self) -> None:
        self.token.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self.token.cancelled

    @property
    def committed(self) -> bool:
        """The job passed its commit point: its result is (being) written; cancel no longer applies."""
        return self.token.committed

    def run(self) -> None:  # runs in a pool thread
        self._emit(self.signals.started)
        try:
            result = self.fn(self._progress, self.token)
        except Cancelled as exc:
            self._emit(self.signals.cancelled, exc.one_line())
        except BaseException as exc:  # noqa: BLE001 - emitted, never lost
            details = traceback.format_exc()
            if not self._heard(ERRORED):
                log_error(f"{self.name} (a background job)", exc, details)
            self._emit(self.signals.errored, exc, details)
        else:
            self._emit(self.signals.returned, result)
        finally:
            self.running = False
            self._emit(self.signals.finished)

    def _heard(self, signature: str) -> bool:
        try:
            return self.signals.receivers(SIGNAL(signature)) > 0
        except RuntimeError:  # the signal object is gone
            return False

    @staticmethod
    def _emit(signal, *args) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the app is shutting down and its signal object is gone
            pass

