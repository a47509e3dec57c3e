"""`JobRunner`: how a widget runs core work, so no widget keeps its own copy of the rules.

Two kinds of job (each a `Job`, gui/jobs/worker.py):
- the main job (`run`): one at a time (open, export, validate...), reported (`started`,
  `progress`, `failed`, `ended`, `finished`) and cancellable. A result the caller cannot use (its
  `on_result` raises) is reported as the job's failure, never lost.
- side jobs (`side`): quiet work beside it (the plan, the filtered tree, the preview model): no
  progress, only the newest answer of each name is used (an older one is cancelled and its answer
  dropped; `drop` does the same to the one in flight). They run one at a time in one shared pool
  thread, under `quiet_gc` (Python's full collections would hold the GIL the GUI thread needs); a
  side job that mostly waits on a child (`serial=False`) runs beside them.
Callbacks run on the GUI thread and never after the runner (a child of its widget) is deleted.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QThreadPool, Signal

from .quiet_gc import quiet_gc
from .worker import Job, JobFn

_lane: QThreadPool | None = None


def serial_lane() -> QThreadPool:
    """The one pool thread side jobs share (see the module docstring)."""
    global _lane
    if _lane is None:
        _lane = QThreadPool()
        _lane.setMaxThreadCount(1)
    return _lane


class JobRunner(QObject):
    """See the module docstring."""

    started = Signal(str)  # the main job's name
    progress = Signal(object, str)  # (fraction or None, message) of the main job
    message = Signal(str)  # a line for the log ("busy: ...", "export cancelled; already written: ...")
    failed = Signal(str, object, str)  # (name, exception, traceback text): the caller shows the error
    ended = Signal(str, str)  # (name, "returned" | "errored" | "cancelled")
    finished = Signal(str)  # the main job is over (after `ended`); the runner is free again

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.job: Job | None = None
        self.side_jobs: set[Job] = set()
        self._generations: dict[str, int] = {}
        self._newest: dict[str, Job] = {}  # the side job of each name whose answer is wanted

    @property
    def busy(self) -> bool:
        return self.job is not None

    def _alive(self) -> bool:
        """False once Qt has deleted the runner (with its widget)."""
        return shiboken6.isValid(self)

    # --- the main job ---------------------------------------------------------------------------
    def run(self, name: str, fn: JobFn, on_result: Callable[[Any], None]) -> Job | None:
        """Start `fn` as the main job; None (and a `message`) when one is already running."""
        if self.job is not None:
            self.message.emit(f"busy: {self.job.name} is running")
            return None
        job = self.job = Job(fn, name)
        job.signals.progress.connect(lambda fraction, text: self._alive() and self.progress.emit(fraction, text))
        job.signals.returned.connect(lambda result: self._alive() and self._returned(job, on_result, result))
        job.signals.errored.connect(lambda exc, tb: self._alive() and self._failed(job, exc, tb))
        job.signals.cancelled.connect(lambda text: self._alive() and self._cancelled(job, text))
        job.signals.finished.connect(lambda: self._alive() and self._finished(job))
        self.started.emit(name)
        job.start()
        return job

    def cancel(self) -> Job | None:
        """Ask the main job to stop (it may be past its commit point: `Job.committed`); returns it."""
        if self.job is not None:
            self.job.cancel()
        return self.job

    def _release(self, job: Job) -> None:
        """The runner is free as soon as its job has ended, before the callbacks run: a result
        handler (or whoever waits for its signal) may start the next job at once. `finished`
        arrives later, in its own event."""
        if self.job is job:
            self.job = None

    def _returned(self, job: Job, on_result, result) -> None:
        self._release(job)
        if job.cancel_requested and job.committed:
            self.message.emit(f"{job.name}: the cancel came after the result was written; it is kept")
        try:
            on_result(result)
        except Exception as exc:  # noqa: BLE001 - a result the window cannot use is an error dialog
            self._failed(job, exc, traceback.format_exc())
            return
        self.ended.emit(job.name, "returned")

    def _failed(self, job: Job, exc: BaseException, details: str) -> None:
        self._release(job)
        self.failed.emit(job.name, exc, details)
        self.ended.emit(job.name, "errored")

    def _cancelled(self, job: Job, text: str) -> None:
        """`text`: the `Cancelled` line, which says what the job left written (`Cancelled`'s
        default: nothing)."""
        self._release(job)
        self.message.emit(f"{job.name} {text}")
        self.ended.emit(job.name, "cancelled")

    def _finished(self, job: Job) -> None:
        self._release(job)
        self.finished.emit(job.name)

    # --- side jobs: newest answer only ---------------------------------------------------------
    def side(self, name: str, fn: JobFn, on_result: Callable[[Any], None],
             on_error: Callable[[BaseException], None] | None = None, serial: bool = True) -> Job:
        """Run `fn` quietly; only the newest `side` job of this `name` reaches its callbacks.
        `serial`: in the one-at-a-time lane (see the module docstring)."""
        generation = self.drop(name)

        def current() -> bool:
            return self._alive() and self._generations.get(name) == generation

        def quiet(progress, cancel):
            with quiet_gc():
                return fn(progress, cancel)

        job = Job(quiet, name)
        job.signals.returned.connect(lambda result: current() and on_result(result))
        if on_error is not None:
            job.signals.errored.connect(lambda exc, _tb: current() and on_error(exc))
        self.side_jobs.add(job)
        self._newest[name] = job
        job.signals.finished.connect(lambda: self._side_finished(name, job))
        job.start(serial_lane() if serial else None)
        return job

    def drop(self, name: str) -> int:
        """Cancel the `name` side job in flight (if any) and ignore its answer; returns the new generation."""
        self._generations[name] = generation = self._generations.get(name, 0) + 1
        superseded = self._newest.pop(name, None)
        if superseded is not None:
            superseded.cancel()
        return generation

    def drop_all(self) -> None:
        """Cancel every side job in flight and ignore their answers (the window is closing): none
        is left holding a thread of the shared pool."""
        for name in list(self._newest):
            self.drop(name)

    def _side_finished(self, name: str, job: Job) -> None:
        self.side_jobs.discard(job)
        if self._newest.get(name) is job:
            del self._newest[name]
