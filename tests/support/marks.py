"""Waiting for a child process to reach a point: a mark file it writes there.

A wait for an event, never for time to pass: the bound only turns a hang into a failure.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

HANG_BOUND_S = 300  # a bound against a hang, not a measurement


def wait_for_mark(mark: Path, child: subprocess.Popen, what: str) -> None:
    """Return once `mark` exists; fail if `child` ended first or nothing came within the bound
    (`what`: the failure's words)."""
    give_up = time.monotonic() + HANG_BOUND_S
    while not mark.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < give_up, what
        time.sleep(0.005)
