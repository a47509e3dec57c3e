"""Run one core function in a fresh Python process: its GIL and its memory are not the caller's.

Why: some core work holds Python's GIL for seconds whatever thread runs it (ONNX Runtime's
quantization tooling loads, shape-infers and saves whole models; validation parses models with
inline weights), freezing the app's window; in a child the GUI thread keeps the GIL and the memory
goes when the child does (figures: docs/performance.md).

Contract: `call_in_child(fn, *args, progress=..., cancel=..., **kwargs)` calls the module-level
`fn(*args, progress=<proxy>, cancel=<proxy token>, **kwargs)` in `python -m
onnxport.core.util.child_call` and returns its result or raises its exception (with its `hint`,
its traceback text in `child_traceback`). Progress is forwarded to the caller; the caller's cancel
reaches the child's token, and a child whose caller died cancels itself; a commit in the child
commits the caller's token. A child that dies without answering raises `OnnxportError` naming its
exit status. Arguments and results travel pickled over private pipes between this process and the
child it started (never from a file)."""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from onnxport.core.util.background import make_background
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.malloc_tuning import tuned_environ
from onnxport.core.util.progress import CancelToken

_HEADER = struct.Struct("<Q")
_CANCEL = b"c"
PROGRESS_INTERVAL_S = 0.05


def call_in_child(fn: Callable, *args, progress: Callable[[float | None, str], None] | None = None,
                  cancel: CancelToken | None = None, **kwargs) -> Any:
    """See the module docstring."""
    if cancel is not None:
        cancel.check()
    read_fd, write_fd = os.pipe()
    request = pickle.dumps((fn.__module__, fn.__qualname__, args, kwargs, list(sys.path)))
    try:
        child = subprocess.Popen([sys.executable, "-m", "onnxport.core.util.child_call", str(write_fd)],
                                 stdin=subprocess.PIPE, pass_fds=(write_fd,), env=tuned_environ())
        make_background(child)  # the app's GUI thread comes first and keeps a core
    finally:
        os.close(write_fd)
    answers = os.fdopen(read_fd, "rb")
    stop_forwarding = None
    try:
        child.stdin.write(_HEADER.pack(len(request)) + request)
        child.stdin.flush()
        if cancel is not None:  # no thread polls the token: it would take the app's GIL 10 times a second
            stop_forwarding = cancel.on_cancel(lambda: _tell_cancel(child))
        while True:
            frame = _read_frame(answers)
            if frame is None:
                code = child.wait()
                raise OnnxportError(f"{fn.__name__} ended without an answer (its process exited with status {code})")
            kind, *body = frame
            if kind == "progress" and progress is not None:
                progress(*body)
            elif kind == "commit" and cancel is not None:
                cancel.commit()
            elif kind == "returned":
                return body[0]
            elif kind == "errored":
                raise body[0]
    finally:
        if stop_forwarding is not None:
            stop_forwarding()
        answers.close()
        if child.poll() is None:
            try:
                child.stdin.close()  # the child's cancel reader ends; the child ends after its answer
            except OSError:
                pass
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _tell_cancel(child: subprocess.Popen) -> None:
    """Send the cancel byte (from the thread that cancels; a child already gone or a closed pipe
    needs no telling)."""
    try:
        child.stdin.write(_CANCEL)
        child.stdin.flush()
    except (OSError, ValueError):
        pass


def _read_frame(stream) -> tuple | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    return pickle.loads(body) if len(body) == size else None


# --- the child's side ------------------------------------------------------------------------------
class _ChildToken(CancelToken):
    """The child's cancel token: set by the parent's cancel byte; a commit is told to the parent."""

    def __init__(self, send) -> None:
        super().__init__()
        self._send = send

    def commit(self) -> None:
        super().commit()
        self._send(("commit",))


def _read_exact(fd: int, size: int) -> bytes:
    """`size` bytes from `fd` (fewer only if it ends first)."""
    parts, left = [], size
    while left:
        part = os.read(fd, left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _child_main(fd: int) -> int:
    # a terminal's Ctrl-C reaches the whole process group: the caller decides, and cancels this
    # child through its token (the cancel byte), never by an exception raised anywhere in it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(fd, "wb")
    lock = threading.Lock()

    def send(frame: tuple) -> None:
        data = pickle.dumps(frame)
        with lock:
            out.write(_HEADER.pack(len(data)) + data)
            out.flush()

    # stdin is read on its raw descriptor: a daemon thread blocked in a read of `sys.stdin.buffer`
    # holds its lock, and the interpreter's shutdown then aborts ("could not acquire lock")
    (size,) = _HEADER.unpack(_read_exact(0, _HEADER.size))
    module, qualname, args, kwargs, path = pickle.loads(_read_exact(0, size))
    sys.path[:] = path
    token = _ChildToken(send)

    def read_cancel() -> None:
        if os.read(0, 1) in (_CANCEL, b""):  # a cancel, or the caller is gone (its end closed)
            token.cancel()

    threading.Thread(target=read_cancel, daemon=True).start()
    last = [0.0]

    def progress(fraction: float | None, message: str) -> None:
        now = time.monotonic()  # at most ~20 a second cross the pipe (the app's worker throttles so)
        if now - last[0] >= PROGRESS_INTERVAL_S or (fraction is not None and fraction >= 1.0):
            last[0] = now
            send(("progress", fraction, message))

    try:
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        result = fn(*args, progress=progress, cancel=token, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - sent to the caller, never lost
        exc.child_traceback = traceback.format_exc()
        try:
            send(("errored", exc))
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text does
            send(("errored", RuntimeError(f"{type(exc).__name__}: {exc}\n{exc.child_traceback}")))
        return 1
    send(("returned", result))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1])))
