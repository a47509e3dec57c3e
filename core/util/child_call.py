"""The one child protocol, the caller's side: the only module under core/ that starts processes.

A `Child` is a process in an environment (onnxport's own, or another Python: the training
environment) running util/child_main.py, which serves calls one at a time: a named function of a
module, with a JSON request and bytes in and JSON or bytes messages out (`start_call`, `receive`,
`call`), or, in onnxport's own environment, onnxport's own objects pickled over the private pipes
(`call_in_child`). Answers about a stranger's file travel as JSON or bytes, never pickled.
Progress and the commit point cross; an error comes back as one `OnnxportError` line (its class
if it is one of util.errors'; util/child_wire.py); a child that dies is `ChildDied`, one line naming the signal.
Cancel: the child's token is set (it stops at its next check), then after `GRACE_S` its process
group is killed; either way the call raises `Cancelled`. No thread waits on a timer: a cancel
wakes the waiting thread through a pipe. Children start isolated (`child_command`) in a fixed
folder (`child_folder`) and never start processes themselves: there a call runs in process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnxport.core.util.background import make_background
from onnxport.core.util.child_main import CHILD_VARIABLE, GRACE_S, HEADER, frame, read_frame
from onnxport.core.util.child_wire import ChildDied, pickled, rebuilt, status
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.malloc_tuning import tuned_environ
from onnxport.core.util.progress import CancelToken, ProgressFn

CHILD_MAIN = Path(__file__).with_name("child_main.py")
# Variables of onnxport's own environment that would leak its packages into another environment
# (`-I` ignores the PYTHON* ones; VIRTUAL_ENV names a venv that is not the child's).
ISOLATED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")


def child_command(python: str | Path, *args: str) -> list[str]:
    """The command line of a child: isolated (`-I`: neither the current folder nor a script's own
    folder on its module path, no user site, no PYTHON* variables), so a stranger's `json.py` in the
    folder onnxport runs in is never imported. The installed packages (an editable install's
    finder included) import as usual."""
    return [str(python), "-I", *args]


def child_folder() -> str:
    """The working directory every child starts in: a fixed one, never the user's current folder
    (paths crossing to a child are absolute)."""
    return tempfile.gettempdir()


def in_child() -> bool:
    """Whether this process is one of onnxport's children (which start no process of their own)."""
    return os.environ.get(CHILD_VARIABLE) == "1"


def module_file(module: str) -> str | None:
    """The file of `module` as this process finds it: the child imports the module by name from its
    own (isolated) path, and loads this file only where that finds no such module."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _environment() -> dict[str, str]:
    env = {k: v for k, v in tuned_environ().items() if k not in ISOLATED}
    env[CHILD_VARIABLE] = "1"
    return env


class Child:
    """A child process in the environment of `python` (default: this one), serving calls one at a
    time; it starts with the first call and again after it died. `label` names it in its errors;
    `background`: at a lower priority (util/background.py). A context manager (closing kills it)."""

    def __init__(self, python: str | Path | None = None, *, label: str | None = None,
                 background: bool = False) -> None:
        self.python = str(python or sys.executable)
        self.label, self.background = label, background
        self._proc: subprocess.Popen | None = None
        self._fd: int | None = None  # the child's messages
        self._wake: tuple[int, int] | None = None  # a cancel wakes the waiting thread through it
        self._stderr = None
        self._code: int | None = None
        self._failed_start: str | None = None
        self._calls = 0
        self._call: dict | None = None  # the call under way: its id, target, progress, pickled

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status of the last process once it ended (negative: the signal that killed it)."""
        return self._code

    def start_call(self, target: str, request: Any = None, data: bytes = b"", *,
                   progress: ProgressFn | None = None, pickled: bool = False) -> None:
        """Start `target` ("package.module:function"); read its messages with `receive`. Never
        raises: a child that cannot start is `ChildDied` at the first `receive`."""
        if self._call is not None:
            raise RuntimeError("a call is already under way in this child")
        self._calls += 1
        self._call = {"id": self._calls, "target": target, "progress": progress, "pickled": pickled}
        if self._proc is None:
            self._start()
        header = json.dumps({"id": self._calls, "target": target, "request": request, "pickled": pickled,
                             "file": module_file(target.partition(":")[0])}).encode()
        if self._proc is not None:
            self._write(frame(b"q", HEADER.pack(len(header)) + header + data))

    def receive(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The call's next message (bytes, a JSON value, or an object when pickled); None once it
        returned. Raises the child's error (see the module docstring), `ChildDied`, `Cancelled` on
        a cancel of `cancel` (see `GRACE_S`), or `TimeoutError` after `timeout` seconds without a
        message (the call runs on). Progress goes to the `progress` given at the start."""
        call = self._call
        if call is None:
            return None
        forget = cancel.on_cancel(self._tell_cancel) if cancel is not None else None
        try:
            while True:
                kind, body = self._next_frame(cancel, timeout)
                if kind == b"p":
                    if call["progress"] is not None:
                        call["progress"](*json.loads(body))
                elif kind == b"c":
                    if cancel is not None:
                        cancel.commit()
                elif kind in (b"r", b"e"):
                    self._call = None
                    if kind == b"e":
                        raise rebuilt(json.loads(body), self._name(call))
                    if cancel is not None:
                        cancel.check()  # ended cooperatively: still a cancelled call
                    return None
                elif kind == b"j":
                    return json.loads(body)
                elif kind == b"b" or (kind == b"k" and not call["pickled"]):
                    return body  # a pickle nobody asked for stays bytes: never unpickled here
                elif kind == b"k":
                    return pickle.loads(body)  # our own objects, from our own call_in_child
        finally:
            if forget is not None:
                forget()

    def call(self, target: str, request: Any = None, data: bytes = b"", *, progress: ProgressFn | None = None,
             cancel: CancelToken | None = None, timeout: float | None = None, pickled: bool = False) -> Any:
        """`target` run to its end: its last message (what it returned). Raises what `receive`
        raises, an `OnnxportError` after `timeout` seconds (the child killed)."""
        if cancel is not None:
            cancel.check()
        self.start_call(target, request, data, progress=progress, pickled=pickled)
        deadline = None if timeout is None else time.monotonic() + timeout
        answer = None
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                message = self.receive(cancel, left)
                if message is None:
                    return answer
                answer = message
        except TimeoutError:
            self.close()
            raise OnnxportError(f"{target} gave no answer within {timeout:g} s") from None
        except BaseException:
            if self._call is not None:  # a failing callback, an interrupt: the call is abandoned
                self.close()
            raise

    def close(self) -> None:
        """Kill the child's process group if it still runs, reap it, close the pipes (never raises)."""
        proc, self._proc, self._call = self._proc, None, None
        if proc is not None:
            self._kill(proc)
            self._code = proc.wait()
            try:
                proc.stdin.close()
            except OSError:
                pass
        for fd in (self._fd, *(self._wake or ())):
            if fd is not None:
                os.close(fd)
        self._fd = self._wake = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # ---- internals -------------------------------------------------------------------------------
    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # its last line says why a child died
        read_fd, write_fd = os.pipe()
        try:
            self._proc = subprocess.Popen(
                child_command(self.python, str(CHILD_MAIN), str(write_fd)), stdin=subprocess.PIPE,
                stdout=self._stderr, stderr=self._stderr, pass_fds=(write_fd,), env=_environment(),
                cwd=child_folder(), start_new_session=True)
        except OSError as exc:
            os.close(read_fd)
            self._failed_start = f"{self.python} did not start: {exc.strerror or exc}"
            return
        finally:
            os.close(write_fd)
        self._fd, self._wake, self._code, self._failed_start = read_fd, os.pipe(), None, None
        if self.background:
            make_background(self._proc)

    def _write(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (OSError, ValueError):  # it died: `receive` finds its end closed
            pass

    def _tell_cancel(self) -> None:
        """From the thread that cancels: the cancel to the child, a wake to the waiting thread."""
        call, proc, wake = self._call, self._proc, self._wake
        if call is None or proc is None or wake is None:
            return
        self._write(frame(b"x", str(call["id"]).encode()))
        try:
            os.write(wake[1], b"x")
        except OSError:
            pass

    def _next_frame(self, cancel: CancelToken | None, timeout: float | None) -> tuple[bytes, bytes]:
        if self._proc is None:
            self._died()
        deadline = None if timeout is None else time.monotonic() + timeout
        kill_at = None
        while True:
            if kill_at is None and cancel is not None and cancel.cancelled and not cancel.committed:
                kill_at = time.monotonic() + GRACE_S
            waits = [t for t in (deadline, kill_at) if t is not None]
            wait = max(0.0, min(waits) - time.monotonic()) if waits else None
            ready = select.select([self._fd, self._wake[0]], [], [], wait)[0]
            if self._wake[0] in ready:
                os.read(self._wake[0], 64)
            if self._fd in ready:
                got = read_frame(self._fd)
                if got is None:
                    self._died(cancel)
                return got
            now = time.monotonic()
            if kill_at is not None and now >= kill_at:
                self.close()  # the call did not stop in time
                raise Cancelled()
            if deadline is not None and now >= deadline:
                raise TimeoutError(f"no answer within {timeout} s")

    def _died(self, cancel: CancelToken | None = None) -> None:
        call, failed = self._call, self._failed_start
        if self._proc is not None:
            try:  # its pipe closed: the exit status follows (a kill here would hide it)
                self._proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        tail = self._last_stderr_line()
        self.close()
        self._failed_start = None
        if cancel is not None and cancel.cancelled and not cancel.committed:
            raise Cancelled()
        name = self.label or (self._name(call) if call else "a child process")
        if failed is not None:
            raise ChildDied(f"{name}: {failed}", None)
        crashed = self._code is not None and self._code < 0
        what = "crashed" if crashed else "ended unexpectedly"
        raise ChildDied(f"{name} {what} ({status(self._code)}){tail}", self._code)

    def _name(self, call: dict) -> str:
        return self.label or call["target"].rpartition(":")[2]

    def _last_stderr_line(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - 4096))
        lines = [ln for ln in self._stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        return f": {lines[-1].strip()[:300]}" if lines else ""

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it started goes too
            except (ProcessLookupError, PermissionError):
                proc.kill()


class _InProcess:
    """A call run in this process, answering as a `Child` does: this process is itself a child,
    and children start no processes (a crash here ends the child, which its caller reports)."""

    def __init__(self, target: str, request: Any, data: bytes, progress: ProgressFn | None,
                 cancel: CancelToken | None = None) -> None:
        self.cancel = cancel or CancelToken()
        self.progress = progress or (lambda fraction, message: None)
        self._messages: deque = deque()
        self._error: OnnxportError | None = None
        self.returncode: int | None = 0
        module, _, name = target.partition(":")
        try:
            answer = getattr(importlib.import_module(module), name)(request, data, self)
            if answer is not None:
                self.send(answer)
        except OnnxportError as exc:
            self._error = exc
        except Exception as exc:  # noqa: BLE001 - one line, as from a child
            self._error = OnnxportError(f"{name} failed: {type(exc).__name__}: {exc}".splitlines()[0])

    def send(self, message: Any) -> None:  # what the protocol would carry
        self._messages.append(bytes(message) if isinstance(message, bytes | bytearray | memoryview)
                              else json.loads(json.dumps(message)))

    def receive(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Any:
        if self._messages:
            return self._messages.popleft()
        error, self._error = self._error, None
        if error is not None:
            raise error
        return None

    def close(self) -> None:
        self._messages.clear()


def start_child(target: str, request: Any = None, data: bytes = b"", *, progress: ProgressFn | None = None,
                background: bool = False) -> Child | _InProcess:
    """A child running `target` (see `Child.start_call`); read it with `receive`, then `close` it.
    `background`: at a lower priority, leaving the app's threads the first claim on the CPUs."""
    if in_child():
        return _InProcess(target, request, data, progress)
    child = Child(background=background)
    child.start_call(target, request, data, progress=progress)
    return child


def run_in_child(target: str, request: Any = None, data: bytes = b"", *, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None, timeout: float | None = None, background: bool = False) -> Any:
    """`target` run to its end in a fresh child (`Child.call`): its last message."""
    if in_child():
        if cancel is not None:
            cancel.check()
        run, answer = _InProcess(target, request, data, progress, cancel), None
        while (message := run.receive()) is not None:
            answer = message
        return answer
    with Child(background=background) as child:
        return child.call(target, request, data, progress=progress, cancel=cancel, timeout=timeout)


def call_in_child(fn: Callable, *args, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                  **kwargs) -> Any:
    """`fn(*args, progress=, cancel=, **kwargs)` (a module-level function of onnxport's own) run in
    a fresh child of this environment, its GIL, memory and crashes not the caller's: its result, or
    its error. Arguments and result are pickled over the private pipes (onnxport's own objects;
    relative paths made absolute); a commit there commits `cancel`. In a child: run here."""
    if in_child():
        return fn(*args, progress=progress, cancel=cancel, **kwargs)
    with Child(label=fn.__name__, background=True) as child:
        return child.call(f"{fn.__module__}:{fn.__qualname__}", None, pickled((args, kwargs)),
                          progress=progress, cancel=cancel, pickled=True)
