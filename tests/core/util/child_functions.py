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
    deadline = time.monotonic() + 300  # a bound against a hang, not a measurement
    while time.monotonic() < deadline:
        cancel.check()
        time.sleep(0.01)
    return "not cancelled"


def commit_then_return(*, progress=None, cancel=None):
    cancel.commit()
    return "kept"


def die(*, progress=None, cancel=None):
    os._exit(3)


def absolute(path, *, progress=None, cancel=None):
    return str(path) if path.is_absolute() else "relative"


def divide(a, b, *, progress=None, cancel=None):
    return a / b


def environment_value(name, *, progress=None, cancel=None):
    return os.environ.get(name)


# --- functions for start_child / run_in_child: (request, data, channel), nothing pickled -----------
def echo(request, data, channel):
    channel.progress(1.0, "done")
    channel.send({"pid": os.getpid(), "request": request})
    return data[::-1]


def refuse_in_lines(request, data, channel):
    if request == "user":
        raise OnnxportError("no such output: x\nsecond line", hint="pick one from the tree")
    raise ValueError("bad value\nmore text")


def wait_forever(request, data, channel):
    """Writes its pid to `request` (a path) when running, then sleeps; never answers alone."""
    with open(request + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(request + ".tmp", request)
    time.sleep(60)


def exit_3(request, data, channel):
    os._exit(3)


def never_answers(request, data, channel):
    """A child that never answers in a test's time (ten minutes: a loaded machine's test included)."""
    time.sleep(600)


def wait_for_cancel_then_clean(request, data, channel):
    """Writes `request` when running, then checks its token; on a cancel, writes `request`.cleaned."""
    with open(request, "w") as f:
        f.write(str(os.getpid()))
    while True:
        try:
            channel.cancel.check()
        except BaseException:
            open(request + ".cleaned", "w").close()
            raise
        time.sleep(0.01)


def segfault(request, data, channel):
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def where_and_how(request, data, channel):
    import sys

    return {"pid": os.getpid(), "cwd": os.getcwd(), "isolated": sys.flags.isolated}


def pickled_answer(request, data, channel):
    """A child answering a JSON call with a pickle whose loading would write `request`."""
    import pickle

    channel.write(b"k", pickle.dumps(_WritesOnLoad(request)))


class _WritesOnLoad:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def nested_call(request, data, channel):
    """From inside a child: run `echo` again through the protocol (it runs here, no grandchild)."""
    from onnxport.core.util.child_call import run_in_child

    inner = run_in_child(f"{__name__}:where_and_how")
    return {"outer": os.getpid(), "inner": inner["pid"]}


def sleep_a_minute_marked(request, data, channel):
    """A child sleeping a minute that writes its pid to the file $ONNXPORT_TEST_CHILD_MARK names when it
    starts, and " finished" after its minute: a cancel that kills it leaves no " finished"."""
    mark = os.environ["ONNXPORT_TEST_CHILD_MARK"]
    with open(mark + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(mark + ".tmp", mark)
    time.sleep(60)
    with open(mark, "a") as f:
        f.write(" finished")
