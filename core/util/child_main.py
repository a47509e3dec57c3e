"""The child's side of the one child protocol (util/child_call.py starts it): framed messages.

Run by file path (`python -I child_main.py FD`) in onnxport's environment or in another one (the
training environment, other ONNX Runtime builds) where onnxport is not installed: it imports the
standard library only (Python >= 3.8). It serves calls one at a time until its input ends.
In (stdin): `q` a call (JSON header: id, target "module:function", the module's file, pickled or
not; then data), `x` a cancel of call id. Out (the pipe FD): `p` progress [fraction, message],
`j` JSON / `b` bytes / `k` pickled messages, `c` the commit point, `r` the call returned, `e` it
raised ({"types", "message", "hint", "option", "user", "traceback"}). A target is `function(request, data,
channel)` (JSON and bytes in, `channel.send` out; its return value is its last message) or, pickled
(onnxport's own objects, its own environment only), `function(*args, progress=, cancel=, **kwargs)`.
A cancel sets the call's token (the target stops at its next check); the input ending (the caller
is gone) cancels too, and ends the process after `GRACE_S` if the call does not stop.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pickle
import queue
import struct
import sys
import threading
import time
import traceback

FRAME = struct.Struct("<cQ")  # kind, size of the body that follows
HEADER = struct.Struct("<Q")  # a call's body: the size of its JSON header, the header, its data
GRACE_S = 2.0  # how long a cancelled call may take to stop before its process is killed
REPORT_INTERVAL_S = 0.1  # progress sent at most this often (as util.progress.Throttle)
CHILD_VARIABLE = "ONNXPORT_CHILD"  # set in every child's environment: a child starts no process


def read_exact(fd: int, size: int) -> bytes:
    """`size` bytes from `fd` (fewer only if it ends first)."""
    parts, left = [], size
    while left:
        part = os.read(fd, min(left, 1 << 24))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def read_frame(fd: int) -> tuple[bytes, bytes] | None:
    """(kind, body) of the next frame on `fd`; None once it ended (or ended inside a frame)."""
    head = read_exact(fd, FRAME.size)
    if len(head) < FRAME.size:
        return None
    kind, size = FRAME.unpack(head)
    body = read_exact(fd, size)
    return (kind, body) if len(body) == size else None


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return FRAME.pack(kind, len(body)) + body


def import_target(module: str, file: str | None):
    """`module` by name from this interpreter's own path, else loaded from `file` under that name
    (another environment has no onnxport; a test's helper module is on no installed path)."""
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


class Cancelled(Exception):
    """A cancelled call, where onnxport's own `Cancelled` is not importable (another environment)."""


class _Token:
    """A call's cancel token where onnxport's `CancelToken` is not importable: the same reading side."""

    def __init__(self) -> None:
        self._cancel, self._commit = threading.Event(), threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def committed(self) -> bool:
        return self._commit.is_set()

    def commit(self) -> None:
        self._commit.set()

    def check(self) -> None:
        if self.cancelled and not self.committed:
            raise Cancelled("cancelled; nothing was written")


def _token_class():
    try:
        from onnxport.core.util.progress import CancelToken
    except ImportError:  # another environment: onnxport is not installed there
        return _Token
    return CancelToken


class Channel:
    """What a call's target talks through: `send` a message (bytes, or a JSON value), `progress`
    (a new step, the text before ": ", at once; within a step at most every `REPORT_INTERVAL_S`,
    its last report before the next step's first), `cancel` (the call's token; its `commit()` is
    told to the caller)."""

    def __init__(self, out, lock: threading.Lock) -> None:
        self._out, self._lock = out, lock
        self._last, self._held, self._step = float("-inf"), None, None
        channel = self

        class Token(_token_class()):
            def commit(self) -> None:
                super().commit()
                channel.write(b"c")

        self.cancel = Token()

    def send(self, message) -> None:
        if isinstance(message, (bytes, bytearray, memoryview)):
            self.write(b"b", bytes(message))
        else:
            self.write(b"j", json.dumps(message).encode())

    def progress(self, fraction: float | None, message: str) -> None:
        held, self._held = self._held, None
        step = message.split(": ", 1)[0]
        if held is not None and held[1].split(": ", 1)[0] != step:
            self.write(b"p", json.dumps(held).encode())
        now = time.monotonic()
        if (step != self._step or now - self._last >= REPORT_INTERVAL_S
                or (fraction is not None and fraction >= 1.0)):
            self._last, self._step = now, step
            self.write(b"p", json.dumps([fraction, message]).encode())
        else:
            self._held = [fraction, message]

    def write(self, kind: bytes, body: bytes = b"") -> None:
        with self._lock:
            self._out.write(frame(kind, body))
            self._out.flush()


def _error(exc: BaseException) -> bytes:
    types = [t.__name__ for t in type(exc).__mro__]
    return json.dumps({"types": types, "message": str(exc), "hint": getattr(exc, "hint", None),
                       "option": getattr(exc, "option", None), "user": bool(getattr(exc, "user_error", False)),
                       "traceback": traceback.format_exc()}, default=str).encode()


def _run(header: dict, data: bytes, channel: Channel) -> None:
    """One call: its messages, then `r`, or `e` with what it raised."""
    try:
        module, _, name = header["target"].partition(":")
        fn = import_target(module, header.get("file"))
        for part in name.split("."):
            fn = getattr(fn, part)
        if header.get("pickled"):
            args, kwargs = pickle.loads(data)  # the caller's own objects, over its private pipe
            result = fn(*args, progress=channel.progress, cancel=channel.cancel, **kwargs)
            channel.write(b"k", pickle.dumps(result))
        else:
            result = fn(header.get("request"), data, channel)
            if result is not None:
                channel.send(result)
    except BaseException as exc:  # noqa: BLE001 - sent to the caller as one line, never lost
        channel.write(b"e", _error(exc))
        return
    channel.write(b"r")


class _Calls:
    """The calls read from the input, and which call a cancel is for (one may come before its call
    starts: it is kept until then)."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._id: int | None = None
        self._channel: Channel | None = None

    def started(self, call_id: int, channel: Channel) -> None:
        with self._lock:
            self._id, self._channel = call_id, channel
            if call_id in self._cancelled:
                channel.cancel.cancel()

    def ended(self) -> None:
        with self._lock:
            self._id = None

    def cancel(self, call_id: int | None) -> bool:
        """Cancel call `call_id` (None: the running one); whether a call was running."""
        with self._lock:
            if call_id is not None:
                self._cancelled.add(call_id)
            running = self._id is not None and call_id in (None, self._id)
            if running:
                self._channel.cancel.cancel()
        return running

    def read(self) -> None:
        """The input: calls queued, cancels passed on; its end cancels and ends the process."""
        while (got := read_frame(0)) is not None:
            kind, body = got
            if kind == b"q":
                self.queue.put(body)
            elif kind == b"x":
                self.cancel(int(body))
        self.queue.put(None)
        if self.cancel(None):
            time.sleep(GRACE_S)  # the call did not stop: nobody waits for it
            os._exit(1)


def main(fd: int) -> int:
    out, lock = os.fdopen(fd, "wb"), threading.Lock()
    calls = _Calls()
    # stdin is read on its raw descriptor: a daemon thread blocked in a read of `sys.stdin.buffer`
    # holds its lock, and the interpreter's shutdown then aborts ("could not acquire lock")
    threading.Thread(target=calls.read, daemon=True).start()
    while (body := calls.queue.get()) is not None:
        (size,) = HEADER.unpack(body[:HEADER.size])
        header = json.loads(body[HEADER.size:HEADER.size + size])
        channel = Channel(out, lock)
        calls.started(int(header["id"]), channel)
        _run(header, body[HEADER.size + size:], channel)
        calls.ended()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
