"""Child processes doing background work run at a lower CPU priority than the app.

Why: on a 2-core machine the shape-inference child started with an open, or a quantization
child, competes with the worker thread and the GUI thread for the cores; measured on a
100,000-node open, the types child running beside it made the open 0.05-0.13 s slower. At nice
`BACKGROUND_NICE` the scheduler prefers the app's threads and the child still gets every idle
cycle. Best effort: where priorities cannot be set (another OS, a sandbox), nothing changes.
"""

from __future__ import annotations

import os
import subprocess

BACKGROUND_NICE = 10


def lower_priority(proc: subprocess.Popen) -> None:
    """Make `proc` (just started) a background process; see the module docstring."""
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass
