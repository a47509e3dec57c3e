"""Progress reporting and cooperative cancellation for long core operations, kept apart.

Every long operation takes ``progress: ProgressFn | None`` and ``cancel: CancelToken | None``.
The core never prints; the CLI turns progress into a stderr line and the app into a signal.

Contract (one mechanism for every job):
- Progress never raises: `Reporter(fraction, message)` only reports.
- Cancellation is checked only where an operation calls `check()`: between steps, every chunk of
  a long copy, before its commit point. A cancel raises `Cancelled` there, and the operation's
  `finally`/`with` blocks remove its temps.
- `commit()` marks the commit point (the file is about to be renamed into place). From then on
  `check()` is a no-op and a cancel is ignored: the result exists, so the job reports it as
  written, never as "cancelled". The mark lives on the job's `CancelToken`, so it holds in
  sub-reporters, parents and any other code that checks the same token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from onnxport.core.util.errors import Cancelled

# progress(fraction in [0, 1] or None when unknown, short message)
ProgressFn = Callable[[float | None, str], None]


class CancelToken:
    """One job's cancel flag (set from any thread) and commit mark (set by the job)."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._commit = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._hooks_lock = threading.Lock()

    def cancel(self) -> None:
        self._cancel.set()
        with self._hooks_lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call `hook()` in the cancelling thread when a cancel comes (at once if one came); returns
        the function that removes it. Why: what must pass a cancel on (to a child process) need
        not keep a thread polling the token. `hook` must be quick, never raise, and may run twice."""
        with self._hooks_lock:
            self._hooks.append(hook)
        if self.cancelled:
            hook()

        def remove() -> None:
            with self._hooks_lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def commit(self) -> None:
        """The job passed its commit point: cancelling no longer applies."""
        self._commit.set()

    @property
    def committed(self) -> bool:
        return self._commit.is_set()

    def check(self) -> None:
        """Raise `Cancelled` if cancellation was requested before the commit point."""
        if self._cancel.is_set() and not self._commit.is_set():
            raise Cancelled()


@contextmanager
def step_token(cancel: CancelToken | None) -> Iterator[CancelToken]:
    """A token for one write of a chain (export, then quantize, then benchmark): cancelled with
    `cancel`, with a commit point of its own, so one step's commit leaves the next cancellable."""
    token = CancelToken()
    remove = cancel.on_cancel(token.cancel) if cancel is not None else None
    try:
        yield token
    finally:
        if remove is not None:
            remove()


class Reporter:
    """A job's progress callback and cancel token; see the module docstring.

    A Reporter built over another Reporter (`Reporter(parent.sub(a, b), cancel)`, what nested
    core calls do) shares its token when it is given none, so a commit anywhere holds everywhere.
    """

    def __init__(self, progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> None:
        self._progress = progress
        if cancel is None:
            cancel = progress.token if isinstance(progress, Reporter) else CancelToken()
        self.token = cancel

    def __call__(self, fraction: float | None, message: str) -> None:
        """Report; never checks for cancel. A callback's own error surfaces before the commit
        point; after it, nothing may turn a written result into a failure."""
        if self._progress is None:
            return
        if not self.token.committed:
            self._progress(fraction, message)
            return
        try:
            self._progress(fraction, message)
        except Exception:  # noqa: BLE001 - after the commit point progress is best effort
            pass

    def check(self) -> None:
        """Raise `Cancelled` if the user cancelled and the commit point is not passed yet."""
        self.token.check()

    def commit(self) -> None:
        """Mark the commit point: the last `check()` is behind; from here on cancel is ignored."""
        self.token.commit()

    @property
    def committed(self) -> bool:
        return self.token.committed

    def finished(self, message: str = "done") -> None:
        """Report completion (never raises: see `__call__`)."""
        self(1.0, message)

    def sub(self, start: float, end: float) -> Reporter:
        """A reporter mapping [0, 1] onto [start, end] of this one, on the same token."""
        parent = self

        def scaled(fraction: float | None, message: str) -> None:
            parent(None if fraction is None else start + (end - start) * fraction, message)

        return Reporter(scaled, self.token)


class Monotonic:
    """A `ProgressFn` that never goes back: a fraction below the highest reported so far is shown
    as that highest, and an unknown one (None) once something was known, so a bar never jumps back
    or loses its place when a step starts or reports nothing measurable."""

    def __init__(self, progress: ProgressFn | None) -> None:
        self._progress = progress
        self.highest: float | None = None
        self._last: tuple[float | None, str] | None = None

    def __call__(self, fraction: float | None, message: str) -> None:
        if fraction is not None:
            fraction = min(max(fraction, 0.0), 1.0)
            self.highest = fraction if self.highest is None else max(self.highest, fraction)
        if self._progress is not None and (self.highest, message) != self._last:  # a repeat says nothing
            self._last = (self.highest, message)
            self._progress(self.highest, message)


class Steps:
    """One job's progress split over named steps, in order, by weight (their expected cost).

    `begin(name)` reports the step's start ("quantizing") and returns `step(name)`: a Reporter mapping [0, 1]
    onto its span, its messages named for it ("quantizing: pre-processing", a step's own "done"
    reads "quantizing: done"); `span(names)` is one Reporter over consecutive steps, unnamed, for
    a callee that splits it again with a `Steps` of the same names (post_export). `finished()`
    reports 1.0, "done": only the whole job says done. Fractions are made monotonic here, so
    nothing a step reports can move the job's bar back, and a step's report after a later step
    started (the export's own "done" after the validation it runs before its commit) is dropped.
    """

    def __init__(self, progress: ProgressFn | Reporter | None, steps: list[tuple[str, float]],
                 cancel: CancelToken | None = None) -> None:
        if isinstance(progress, Reporter):
            self.report = Reporter(Monotonic(progress), cancel or progress.token)
        else:
            self.report = Reporter(Monotonic(progress), cancel)
        total = sum(weight for _, weight in steps) or 1.0
        self.order = {name: i for i, (name, _) in enumerate(steps)}
        self.latest = -1  # the latest step that reported: an earlier one's late word is dropped
        self.spans: dict[str, tuple[float, float]] = {}
        at = 0.0
        for name, weight in steps:
            self.spans[name] = (at, at + weight / total)
            at += weight / total

    def begin(self, name: str) -> Reporter:
        """Report that step `name` starts; its Reporter (see `step`)."""
        self.latest = max(self.latest, self.order[name])
        self.report(self.spans[name][0], name)
        return self.step(name)

    def step(self, name: str) -> Reporter:
        """Step `name`'s Reporter, not announced (for a callee that reports its own start)."""
        start, end = self.spans[name]
        scaled = self.report.sub(start, end)

        def named(fraction: float | None, message: str) -> None:
            if self.order[name] < self.latest:  # e.g. the export's "done" after its validation ran
                return
            self.latest = self.order[name]
            scaled(fraction, f"{name}: {message}" if message and message != name else name)

        return Reporter(named, self.report.token)

    def span(self, names: list[str]) -> Reporter:
        return self.report.sub(self.spans[names[0]][0], self.spans[names[-1]][1])

    def finished(self, message: str = "done") -> None:
        self.report.finished(message)


REPORT_INTERVAL_S = 0.05  # at most ~20 reports a second reach a front end (the app's worker, a child's pipe)


class Throttle:
    """Progress passed on at most once per `interval` seconds (and always at 1.0), without losing
    where a step ended: a report held back is sent before the first report of the next step (the
    text before ": "), so a bar never jumps from the middle of one step into the next."""

    def __init__(self, send: ProgressFn, interval: float = REPORT_INTERVAL_S) -> None:
        self._send, self._interval = send, interval
        self._last = float("-inf")
        self._held: tuple[float | None, str] | None = None

    def __call__(self, fraction: float | None, message: str) -> None:
        held, self._held = self._held, None
        if held is not None and _step(held[1]) != _step(message):
            self._send(*held)
        now = time.monotonic()
        if now - self._last >= self._interval or (fraction is not None and fraction >= 1.0):
            self._last = now
            self._send(fraction, message)
        else:
            self._held = (fraction, message)


def _step(message: str) -> str:
    return message.split(": ", 1)[0]
