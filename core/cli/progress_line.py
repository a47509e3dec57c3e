"""Progress on stderr for long CLI runs: a line when the step changes or at most once a second.

Progress is for a person watching a terminal: when stderr is not a terminal (a pipe, a file, a
CI log) nothing is written unless `-v` asked for it (`verbose`); `-q` silences it everywhere.
`add_verbosity(parser)` adds both options; `brief(lines, verbose)` leaves the before/after table
out of a summary unless `-v`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from onnxport.core.util.text import shown

TABLE_START = "before/after:"
TABLE_HINT = "before/after: sizes, parameters, ops and latency side by side with -v"


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="progress on stderr even when it is not a terminal, and the before/after table")


def brief(lines: list[str], verbose: bool) -> list[str]:
    """`lines` without the before/after table (one line says how to get it) unless `verbose`."""
    if verbose or TABLE_START not in lines:
        return lines
    return lines[:lines.index(TABLE_START)] + [TABLE_HINT]


class StderrProgress:
    """A `ProgressFn` that writes `[ 42%] message` lines to stderr, throttled.

    Nothing is shown for the first `delay` seconds: short runs stay quiet. Nothing at all when
    `quiet`, or when stderr is not a terminal and not `verbose`.
    """

    def __init__(self, quiet: bool = False, verbose: bool = False, interval: float = 1.0, delay: float = 1.0,
                 stream: TextIO | None = None) -> None:
        self._stream = stream
        self._quiet = quiet or not (verbose or _is_terminal(stream or sys.stderr))
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
        print(f"[{percent}] {shown(message)}", file=self._stream or sys.stderr, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
