"""The parent side of the training boundary: one child process in the training environment.

`TrainingProcess` starts `runner.py` under the training environment's Python and sends it
requests (see runner.py for the protocol). One process serves many calls, so the ~3-7 s it takes
to import `onnxruntime.training` (which imports torch) is paid once per session, not per call.
Each call carries progress across (`progress(fraction, message)`) and honours a `CancelToken`:
on cancel the child's whole process group is killed and `Cancelled` is raised; the caller, who
handed the child only temp paths, removes them. A child that dies (a native crash, out of
memory) ends the call with one line naming its exit status and its last stderr line.
Paths go to the child as `Path` values in `args` (top level or in lists): `call` makes them
absolute against the caller's current folder, since the child runs in another one.

    with TrainingProcess() as training:
        training.call("artifacts", {...}, progress=..., cancel=...)
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from onnxport.core.training.environment import require_training_python
from onnxport.core.util.child_call import child_command, child_folder
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn

RUNNER = Path(__file__).with_name("runner.py")
POLL_SECONDS = 0.1
# Variables of onnxport's own environment that would leak its packages into the child.
ISOLATED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")


class TrainingProcess:
    """A live child in the training environment; a context manager (closing stops it)."""

    def __init__(self, python: str | Path | None = None) -> None:
        self.python = Path(python) if python else require_training_python()
        self._child: subprocess.Popen | None = None
        self._channel = None
        self._stderr = None
        self._buffer = b""

    def __enter__(self) -> TrainingProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> None:
        if self._child is not None and self._child.poll() is None:
            return
        self.close()  # what is left of a child that ended
        env = {k: v for k, v in os.environ.items() if k not in ISOLATED}
        self._stderr = tempfile.TemporaryFile()
        self._buffer = b""
        read_end, write_end = os.pipe()  # the protocol channel; the child's stdout joins its stderr
        try:
            self._child = subprocess.Popen(
                child_command(str(self.python), "-u", str(RUNNER), str(write_end)), stdin=subprocess.PIPE,
                stdout=self._stderr, stderr=self._stderr, pass_fds=(write_end,), env=env,
                start_new_session=True, cwd=child_folder())
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self._channel = os.fdopen(read_end, "rb", buffering=0)

    def call(self, op: str, args: dict, *, progress: ProgressFn | None = None,
             cancel: CancelToken | None = None) -> dict:
        """Run one operation in the child; its result dict, or `OnnxportError` with one line."""
        if cancel is not None and cancel.cancelled:
            raise Cancelled()
        self.start()
        assert self._child is not None and self._child.stdin is not None
        try:
            request = {"op": op, "args": wire_args(args)}
            self._child.stdin.write((json.dumps(request) + "\n").encode())
            self._child.stdin.flush()
        except BrokenPipeError:
            self._died()
        try:
            message = self._next_message(cancel)
            while "progress" in message:
                if progress is not None:
                    progress(message["progress"], message.get("message", ""))
                message = self._next_message(cancel)
        except BaseException:  # cancelled, interrupted, a failing callback: the child's work is void
            self._abandon()
            raise
        if "result" in message:
            return message["result"]
        if message.get("kind") == "user":
            raise OnnxportError(message["error"])
        raise OnnxportError(f"the training environment failed: {message.get('error')}")

    def close(self) -> None:
        """Stop the child: end of input, then a kill if it lingers."""
        child, self._child = self._child, None
        if child is not None:
            try:
                if child.stdin is not None:
                    child.stdin.close()
                child.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._kill(child)
        self._close_channel()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # ---- internals -----------------------------------------------------------------------------

    def _next_message(self, cancel: CancelToken | None) -> dict:
        assert self._child is not None and self._channel is not None
        fd = self._channel.fileno()
        while True:
            if cancel is not None and cancel.cancelled:
                raise Cancelled()
            if b"\n" in self._buffer:
                break
            ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self._died()
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return {"error": f"unreadable reply {line[:80]!r}", "kind": "internal"}

    def _abandon(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            self._kill(child)
        self._close_channel()

    def _close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _died(self) -> None:
        child, self._child = self._child, None
        self._close_channel()
        status = child.wait() if child is not None else None
        raise OnnxportError(f"the training environment's process ended unexpectedly "
                            f"(exit status {status}){self._last_stderr_line()}")

    def _last_stderr_line(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 4096))
        lines = [ln for ln in self._stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        return f": {lines[-1].strip()[:300]}" if lines else ""

    @staticmethod
    def _kill(child: subprocess.Popen) -> None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)


def wire_args(args: dict) -> dict:
    """`args` as the child reads them: every `Path` (top level or in a list) made absolute here, in
    the caller's current folder (the child's is another); other values as they are."""
    def wire(value):
        if isinstance(value, Path):
            return os.path.abspath(value)
        if isinstance(value, list | tuple):
            return [wire(v) for v in value]
        return value
    return {key: wire(value) for key, value in args.items()}

