"""One mechanism for every core job the app runs: a QRunnable whose signals live on a QObject.

Why: the GUI thread never blocks. A job is a plain function `fn(progress, cancel)` from the core
(open, plan, export, validate, quantize...). `Job.start()` runs it on the app's thread pool and
emits, on the GUI thread (queued connections):

- `started()`;
- `progress(fraction_or_None, message)` from the core's ProgressFn, throttled to ~20 per second
  so a chatty job cannot flood the event loop;
- `returned(result)` on success, or `errored(exc, traceback_text)` - every exception is caught
  in the worker and emitted, never lost; a `Cancelled` arrives as `cancelled()` instead;
- `finished()` always, last.

Cancel is cooperative: `Job.cancel()` sets the core `CancelToken` the job checks between steps;
the core then raises `Cancelled` and cleans up (no partial file: its writers use temp+rename).
Once the job passes its commit point (a file is being renamed into place: `Job.committed`) a
cancel is ignored and the job ends with `returned(result)`: its result was written, and the
window must say so, never "cancelled".
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken

JobFn = Callable[[Callable[[float | None, str], None], CancelToken], Any]
PROGRESS_INTERVAL = 0.05  # seconds between progress signals (the last one always goes)


class JobSignals(QObject):
    started = Signal()
    progress = Signal(object, str)
    returned = Signal(object)
    errored = Signal(object, str)
    cancelled = Signal()
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
        self._last_progress = 0.0
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

    def _progress(self, fraction: float | None, message: str) -> None:
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_INTERVAL or (fraction is not None and fraction >= 1.0):
            self._last_progress = now
            self._emit(self.signals.progress, fraction, message)

    def run(self) -> None:  # runs in a pool thread
        self._emit(self.signals.started)
        try:
            result = self.fn(self._progress, self.token)
        except Cancelled:
            self._emit(self.signals.cancelled)
        except BaseException as exc:  # noqa: BLE001 - emitted, never lost
            self._emit(self.signals.errored, exc, traceback.format_exc())
        else:
            self._emit(self.signals.returned, result)
        finally:
            self.running = False
            self._emit(self.signals.finished)

    @staticmethod
    def _emit(signal, *args) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the app is shutting down and its signal object is gone
            pass

