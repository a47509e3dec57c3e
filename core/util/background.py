"""Child processes doing background work leave the app a core and its priority.

Why: the app's children (the shape-inference child started with an open, the quantization and
validation children) compete with the worker thread and the GUI thread for the cores.
- Priority: at nice `BACKGROUND_NICE` the scheduler prefers the app's threads and the child still
  gets every idle cycle.
- A core: a child runs on all the app's CPUs but one, and ONNX Runtime sizes its thread pool to
  those CPUs (`allowed_cpu_count`), not to the machine: on small VMs a child keeping every vCPU
  busy made the host pause the whole VM, window included (figures: docs/performance.md).
Best effort: where priorities or affinities cannot be set (another OS, a sandbox), nothing changes.
"""

from __future__ import annotations

import os
import subprocess

BACKGROUND_NICE = 10


def background_cpus(allowed: set[int] | None = None) -> set[int] | None:
    """The CPUs a background child may run on: `allowed` (default: this process's) but the lowest
    numbered, which the app keeps; None (no restriction) with fewer than two or where unknown."""
    if allowed is None:
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            return None
    return set(sorted(allowed)[1:]) if len(allowed) >= 2 else None


def make_background(proc: subprocess.Popen) -> None:
    """Make `proc` (just started) a background process; see the module docstring."""
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass
    cpus = background_cpus()
    if cpus is not None:
        try:
            os.sched_setaffinity(proc.pid, cpus)
        except (AttributeError, OSError):
            pass


def allowed_cpu_count() -> int | None:
    """The CPUs this process may run on when that is fewer than the machine has (a background
    child's, a `taskset`), else None. ONNX Runtime sizes its default thread pool to the machine's
    cores whatever the affinity: more threads than CPUs, spinning on each other's CPU."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return allowed if allowed < (os.cpu_count() or allowed) else None
