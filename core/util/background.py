"""Child processes doing background work run at a lower priority; ONNX Runtime's threads fit the
CPUs a process may use.

Why: the app's children (shape inference started with an open, validation and quantization) run
beside the app's GUI thread, which must answer input within a frame. At nice `BACKGROUND_NICE`
the scheduler runs the app's threads first when both want a CPU, and the child still gets every
idle cycle (docs/performance.md). Where a process may use fewer CPUs than the machine has (a
container's cpuset, `taskset`), ONNX Runtime would still start one thread per core of the machine:
`allowed_cpu_count` says how many it may use. Best effort: where priorities cannot be set (another
OS, a sandbox), nothing changes.
"""

from __future__ import annotations

import os
import subprocess

BACKGROUND_NICE = 10


def make_background(proc: subprocess.Popen) -> None:
    """Lower the priority of `proc` (just started); see the module docstring."""
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass


def allowed_cpu_count() -> int | None:
    """The CPUs this process may run on when that is fewer than the machine has (a cpuset, a
    `taskset`), else None. ONNX Runtime sizes its default thread pool to the machine's cores
    whatever the affinity: more threads than CPUs, spinning on each other's CPU."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return allowed if allowed < (os.cpu_count() or allowed) else None
