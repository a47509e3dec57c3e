"""Run core work in a fresh Python process (`python -m onnxport.core.util.child_call`): its GIL,
its memory and its crashes are not the caller's. The one in-environment child protocol.

`call_in_child(fn, *args, progress=, cancel=, **kwargs)` calls the module-level `fn(*args,
progress=<proxy>, cancel=<proxy token>, **kwargs)` and returns its result or raises its exception
(its traceback text in `child_traceback`); arguments and results are pickled over private pipes
between this process and its own child (never from a file). A cancel reaches the child's token; a
commit there commits the caller's; a child whose caller died cancels itself.
`start_child("module:function", request, data)` / `run_in_child(...)` run `function(request, data,
channel)` where nothing is pickled: a JSON request and bytes in, JSON or bytes messages out
(`channel.send`), progress, and an exception as one `OnnxportError` line with its hint. A cancel
kills that child. A child that dies without answering is an `OnnxportError` naming its exit status.
Children start isolated (`child_command`) in a fixed folder (`child_folder`): paths given are absolute.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from onnxport.core.util import errors
from onnxport.core.util.background import make_background
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.malloc_tuning import tuned_environ
from onnxport.core.util.progress import CancelToken, Throttle

_HEADER = struct.Struct("<Q")
_CANCEL = b"c"
_MODULE = "onnxport.core.util.child_call"  # this module by name: run as __main__ in the child


def child_command(python: str, *args: str) -> list[str]:
    """The command line of a child: isolated (`-I`: neither the current folder nor a script's own
    folder on its module path, no user site, no PYTHON* variables), so a stranger's `json.py` in the
    folder onnxport runs in is never imported. The installed packages (an editable install's
    finder included) import as usual."""
    return [str(python), "-I", *args]


def child_folder() -> str:
    """The working directory every child starts in: a fixed one, never the user's current folder
    (paths crossing to a child are absolute)."""
    return tempfile.gettempdir()


def module_file(module: str) -> str | None:
    """The file of `module` as this process finds it: the child imports the module by name from its
    own (isolated) path, and loads this file only where that finds no such module."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def import_target(module: str, file: str | None):
    """The child's side of `module_file`: `module` by name, else from `file` under that name."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if found or not file:
        return importlib.import_module(module)
    spec = importlib.util.spec_from_file_location(module, file)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    spec.loader.exec_module(loaded)
    return loaded


class _AbsolutePaths(pickle.Pickler):
    """Pickles every path as an absolute one: the child runs in another folder (`child_folder`)."""

    def reducer_override(self, obj):
        if isinstance(obj, PurePath) and not obj.is_absolute():
            return type(obj), (os.path.abspath(obj),)
        return NotImplemented


def _pickled_request(value) -> bytes:
    buffer = io.BytesIO()
    _AbsolutePaths(buffer).dump(value)
    return buffer.getvalue()


def call_in_child(fn: Callable, *args, progress: Callable[[float | None, str], None] | None = None,
                  cancel: CancelToken | None = None, **kwargs) -> Any:
    """See the module docstring."""
    if cancel is not None:
        cancel.check()
    read_fd, write_fd = os.pipe()
    request = _pickled_request((fn.__module__, fn.__qualname__, args, kwargs, module_file(fn.__module__)))
    try:
        child = subprocess.Popen(child_command(sys.executable, "-m", _MODULE, str(write_fd)), cwd=child_folder(),
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
        part = os.read(fd, min(left, 1 << 24))
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
    module, qualname, args, kwargs, file = pickle.loads(_read_exact(0, size))
    token = _ChildToken(send)

    def read_cancel() -> None:
        if os.read(0, 1) in (_CANCEL, b""):  # a cancel, or the caller is gone (its end closed)
            token.cancel()

    threading.Thread(target=read_cancel, daemon=True).start()
    progress = Throttle(lambda fraction, message: send(("progress", fraction, message)))

    try:
        fn = import_target(module, file)
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


# --- a named function, with nothing pickled: JSON and bytes in, JSON and bytes out -----------------
_FRAME = struct.Struct("<cQ")  # kind, size of the body that follows
_JSON, _BYTES, _PROGRESS, _ERROR = b"j", b"b", b"p", b"e"


class ChildRun:
    """A child running `function(request, data, channel)` of `target` ("package.module:function")
    with a JSON `request` and bytes `data`; `receive` its messages, `close` it. Never raises at the
    start: a child that cannot start is one that ended without a message (`returncode` -1)."""

    def __init__(self, target: str, request: Any = None, data: bytes = b"", *,
                 progress: Callable[[float | None, str], None] | None = None, background: bool = False) -> None:
        self.target = target
        self._progress = progress
        self._code: int | None = None
        header = json.dumps({"target": target, "request": request,
                             "file": module_file(target.partition(":")[0])}).encode()
        read_fd, write_fd = os.pipe()
        try:
            self._child: subprocess.Popen | None = subprocess.Popen(
                child_command(sys.executable, "-m", _MODULE, "--run", str(write_fd)), cwd=child_folder(), stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write_fd,), env=tuned_environ())
        except OSError:
            self._child, self._code = None, -1
        finally:
            os.close(write_fd)
        self._fd: int | None = read_fd
        if self._child is None:
            return
        if background:
            make_background(self._child)
        try:  # the child reads it all at once; its stdin then stays open: closed, the caller is gone
            self._child.stdin.write(_HEADER.pack(len(header)) + header + _HEADER.pack(len(data)) + data)
            self._child.stdin.flush()
        except OSError:  # it died before reading: `receive` finds its end closed
            pass

    def receive(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The child's next message (bytes, or a JSON value); None once it has ended (`returncode`
        says how). Progress goes to the `progress` given at the start; an exception the child raised
        is raised here as an `OnnxportError` (its class if it is one of util.errors'). A cancel of
        `cancel` kills the child and raises `Cancelled`; no message within `timeout` seconds raises
        `TimeoutError` (the child runs on)."""
        if cancel is not None:
            forget = cancel.on_cancel(lambda: None if cancel.committed else self._kill())
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                if self._fd is None:
                    return None
                if deadline is not None and not select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    raise TimeoutError(f"{self.target}: no answer within {timeout} s")
                frame = _read_exact(self._fd, _FRAME.size)
                kind, size = _FRAME.unpack(frame) if len(frame) == _FRAME.size else (None, 0)
                body = _read_exact(self._fd, size) if kind is not None else b""
                if cancel is not None and cancel.cancelled and not cancel.committed:
                    self.close()  # killed by the hook: reaped here, nothing left running
                    cancel.check()
                if kind is None or len(body) < size:  # the child ended (or was killed)
                    self._ended()
                    return None
                if kind == _BYTES:
                    return body
                if kind == _JSON:
                    return json.loads(body)
                if kind == _PROGRESS and self._progress is not None:
                    self._progress(*json.loads(body))
                elif kind == _ERROR:
                    raise _rebuilt(json.loads(body))
        finally:
            if cancel is not None:
                forget()

    @property
    def returncode(self) -> int | None:
        """The child's exit status once it ended (negative: the signal that killed it)."""
        return self._code

    def close(self) -> None:
        """Kill the child if it still runs, reap it and close the pipes (never raises)."""
        self._kill()
        self._ended()

    def _kill(self) -> None:
        child = self._child
        if child is not None and child.poll() is None:
            try:
                child.kill()
            except OSError:
                pass

    def _ended(self) -> None:
        child, self._child = self._child, None
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        if child is not None:
            try:
                child.stdin.close()
            except OSError:
                pass
            try:
                self._code = child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                self._code = child.wait()


def start_child(target: str, request: Any = None, data: bytes = b"", *,
                progress: Callable[[float | None, str], None] | None = None, background: bool = False) -> ChildRun:
    """See `ChildRun` (`background`: at a lower priority, leaving the app a core)."""
    return ChildRun(target, request, data, progress=progress, background=background)


def run_in_child(target: str, request: Any = None, data: bytes = b"", *,
                 progress: Callable[[float | None, str], None] | None = None, cancel: CancelToken | None = None,
                 timeout: float | None = None, background: bool = False) -> Any:
    """`target`'s function run to its end in a child: its last message (what it returned). Raises
    what `ChildRun.receive` raises, and `OnnxportError` when the child ended without a message or
    with a failure status, or gave none within `timeout` seconds (it is killed)."""
    if cancel is not None:
        cancel.check()
    run = ChildRun(target, request, data, progress=progress, background=background)
    deadline = None if timeout is None else time.monotonic() + timeout
    answer = missing = object()
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                message = run.receive(cancel, left)
            except TimeoutError:
                raise OnnxportError(f"{target} gave no answer within {timeout:g} s") from None
            if message is None:
                break
            answer = message
    finally:
        run.close()
    if answer is missing or run.returncode != 0:
        raise OnnxportError(f"{target} ended without an answer (its process exited with status {run.returncode})")
    return answer


def _rebuilt(error: dict) -> OnnxportError:
    """The child's exception as the caller raises it: one line, its hint, its traceback's text."""
    kind = getattr(errors, str(error.get("type")), None)
    kind = kind if isinstance(kind, type) and issubclass(kind, OnnxportError) else None
    message = str(error.get("message", "")) if kind else f"{error.get('type')}: {error.get('message', '')}"
    message = (message.strip().splitlines() or [""])[0]
    try:
        exc = (kind or OnnxportError)(message, hint=error.get("hint"))
    except TypeError:  # Cancelled takes its message only
        exc = (kind or OnnxportError)(message)
    exc.child_traceback = str(error.get("traceback", ""))
    return exc


class Channel:
    """The child's side of `ChildRun`: `send` a message (bytes, or a JSON value), `progress`, and
    `cancel`, a token set when the caller is gone."""

    def __init__(self, out, cancel: CancelToken) -> None:
        self._out, self._lock, self.cancel = out, threading.Lock(), cancel
        self.progress = Throttle(self._send_progress)

    def send(self, message: Any) -> None:
        if isinstance(message, bytes | bytearray | memoryview):
            self._frame(_BYTES, bytes(message))
        else:
            self._frame(_JSON, json.dumps(message).encode())

    def _send_progress(self, fraction: float | None, message: str) -> None:
        self._frame(_PROGRESS, json.dumps([fraction, message]).encode())

    def _frame(self, kind: bytes, body: bytes) -> None:
        with self._lock:
            self._out.write(_FRAME.pack(kind, len(body)) + body)
            self._out.flush()


def _run_main(fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in `_child_main`: the caller decides
    (size,) = _HEADER.unpack(_read_exact(0, _HEADER.size))
    header = json.loads(_read_exact(0, size))
    (size,) = _HEADER.unpack(_read_exact(0, _HEADER.size))
    data = _read_exact(0, size)
    token = CancelToken()
    threading.Thread(target=lambda: os.read(0, 1) == b"" and token.cancel(), daemon=True).start()
    channel = Channel(os.fdopen(fd, "wb"), token)
    try:
        module, _, name = header["target"].partition(":")
        answer = getattr(import_target(module, header.get("file")), name)(header["request"], data, channel)
        if answer is not None:
            channel.send(answer)
    except BaseException as exc:  # noqa: BLE001 - sent to the caller as one line, never lost
        channel._frame(_ERROR, json.dumps({"type": type(exc).__name__, "message": str(exc),
                                            "hint": getattr(exc, "hint", None),
                                            "traceback": traceback.format_exc()}, default=str).encode())
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        sys.exit(_run_main(int(sys.argv[2])))
    sys.exit(_child_main(int(sys.argv[1])))
