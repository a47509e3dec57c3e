"""What crosses the child protocol's boundary (util/child_call.py), the caller's side.

Answers: JSON or bytes; a pickle only from a call that sent one (`call_in_child`: onnxport's own
objects over its private pipes). Pickled arguments carry absolute paths (`pickled`): the child
runs in another folder. Errors: `rebuilt` turns the child's report into one `OnnxportError` line
(its class when it is one of util.errors', its traceback's text in `child_traceback`); a child
that died is `ChildDied`, named by its exit status or signal (`status`).
"""

from __future__ import annotations

import io
import os
import pickle
import signal
from pathlib import PurePath

from onnxport.core.util import errors
from onnxport.core.util.errors import OnnxportError


class ChildDied(OnnxportError):
    """The child's process ended in the middle of a call (a crash, out of memory, a kill)."""

    def __init__(self, message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.returncode = returncode


class _AbsolutePaths(pickle.Pickler):
    """Pickles every path as an absolute one: the child runs in another folder (`child_folder`)."""

    def reducer_override(self, obj):
        if isinstance(obj, PurePath) and not obj.is_absolute():
            return type(obj), (os.path.abspath(obj),)
        return NotImplemented


def pickled(value) -> bytes:
    buffer = io.BytesIO()
    _AbsolutePaths(buffer).dump(value)
    return buffer.getvalue()


def status(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def rebuilt(error: dict, label: str) -> OnnxportError:
    """The child's exception as the caller raises it: one line, its hint, its traceback's text."""
    types = [str(t) for t in error.get("types") or []]
    kind = next((k for k in (getattr(errors, t, None) for t in types)
                 if isinstance(k, type) and issubclass(k, OnnxportError)), None)
    message = str(error.get("message", ""))
    if kind is None and not error.get("user"):
        message = f"{label} failed: {types[0] if types else 'error'}: {message}"
    message = (message.strip().splitlines() or [""])[0]
    try:
        exc = (kind or OnnxportError)(message, hint=error.get("hint"), option=error.get("option"))
    except TypeError:  # Cancelled takes its message only
        exc = (kind or OnnxportError)(message)
    exc.child_traceback = str(error.get("traceback", ""))
    return exc
