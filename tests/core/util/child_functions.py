"""Functions the child_call tests run in a child process (module level: the child imports them)."""

from __future__ import annotations

import os
import time

from onnxport.core.util.errors import OnnxportError


def add(a, b, *, scale=1, progress=None, cancel=None):
    progress(0.5, "half way")
    progress(1.0, "done")
    return {"sum": (a + b) * scale, "pid": os.getpid()}


def refuse(*, progress=None, cancel=None):
    raise OnnxportError("no such output: x", hint="pick one from the tree")


def wait_for_cancel(marker, *, progress=None, cancel=None):
    """Writes `marker` when running, then checks its token until cancelled; never finishes alone."""
    with open(marker, "w") as f:
        f.write("running")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cancel.check()
        time.sleep(0.01)
    return "not cancelled"


def commit_then_return(*, progress=None, cancel=None):
    cancel.commit()
    return "kept"


def die(*, progress=None, cancel=None):
    os._exit(3)


def environment_value(name, *, progress=None, cancel=None):
    return os.environ.get(name)
