"""Progress on stderr for long CLI runs: a line when the step changes or at most once a second."""

from __future__ import annotations

import sys
import time


class StderrProgress:
    """A `ProgressFn` that writes `[ 42%] message` lines to stderr, throttled.

    Nothing is shown for the first `delay` seconds: short runs stay quiet.
    """

    def __init__(self, quiet: bool = False, interval: float = 1.0, delay: float = 1.0) -> None:
        self._quiet = quiet
        self._interval = interval
        self._start = time.monotonic()
        self._delay = delay
        self._last_time = 0.0
        self._last_message = ""

    def __call__(self, fraction: float | None, message: str) -> None:
        now = time.monotonic()
        if self._quiet or now - self._start < self._delay:
            return
        if message == self._last_message and now - self._last_time < self._interval:
            return
        self._last_time, self._last_message = now, message
        percent = "    " if fraction is None else f"{100 * min(max(fraction, 0.0), 1.0):3.0f}%"
        print(f"[{percent}] {message}", file=sys.stderr, flush=True)
