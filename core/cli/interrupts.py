"""The CLI's one cancellation model: SIGINT/SIGTERM cancel the running command's `CancelToken`.

Contract (handlers are installed from the main thread only; elsewhere nothing changes):
- `with Interrupts(watcher):` a command runs with SIGINT/SIGTERM caught (a signal the parent set
  to be ignored stays ignored); the previous handlers come back after. No handler raises: nothing
  is cut halfway (a lock, `Thread.start()`), so no code needs shielding from a signal.
- The first signal cancels every token `call_token()` handed out: the core stops at its next
  check (or the one after a step that cannot check, a blocking ONNX Runtime run), its cleanup
  removes its temps, and `main` prints the interrupted line (exit 130 SIGINT, 143 SIGTERM).
- A second signal ends the process at once: live temps removed (util/atomic.py), the line for that
  signal, `os._exit`. A thread fed by `signal.set_wakeup_fd` acts on it, so it works while the
  main thread waits in native code that released the GIL.
- `call_token()`: a fresh token for one core call (a commit in one leaves the next cancellable);
  raises `Cancelled` once a signal came (there is no next call).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken
from onnxport.core.util.written_files import WrittenFiles, interrupted_line

HANDLED = (signal.SIGINT, signal.SIGTERM)
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated by SIGTERM"}

_active: list[Interrupts] = []  # the command running now (main() may nest in tests)


def exit_code(signum: int) -> int:
    """What a shell reports for a process a signal ended: 128 + its number."""
    return 128 + signum


def call_token() -> CancelToken:
    """A token for one core call of the running command; see the module docstring."""
    token = CancelToken()
    if _active:
        _active[-1].adopt(token)
    return token


class Interrupts:
    """SIGINT/SIGTERM for one command run; see the module docstring."""

    def __init__(self, watcher: WrittenFiles | None = None) -> None:
        self.watcher = watcher
        self.signum: int | None = None  # the first signal, once one came
        self._count = 0
        self._tokens: list[CancelToken] = []
        self._lock = threading.Lock()
        self._previous: dict[int, object] = {}
        self._wakeup_previous = -1
        self._fds: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None

    def adopt(self, token: CancelToken) -> None:
        with self._lock:
            if self.signum is not None:
                raise Cancelled()
            self._tokens.append(token)

    def line(self, signum: int) -> str:
        return interrupted_line(WORDS[signum], self.watcher)

    def __enter__(self) -> Interrupts:
        _active.append(self)
        if threading.current_thread() is not threading.main_thread():
            return self
        wanted = [sig for sig in HANDLED if signal.getsignal(sig) is not signal.SIG_IGN]
        if not wanted:
            return self
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # set_wakeup_fd's C handler never blocks
        self._fds = (read_fd, write_fd)
        self._thread = threading.Thread(target=self._watch, args=(read_fd,), name="onnxport-signals", daemon=True)
        self._thread.start()
        self._wakeup_previous = signal.set_wakeup_fd(write_fd)
        self._previous = {sig: signal.signal(sig, self._note) for sig in wanted}
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            if self._fds is not None:
                signal.set_wakeup_fd(self._wakeup_previous)
                os.close(self._fds[1])  # the watcher reads the end and returns
                self._thread.join()
                os.close(self._fds[0])
        finally:
            _active.remove(self)

    def _note(self, signum, frame) -> None:
        """The Python-level handler (main thread): only records the signal, so that `main`, which
        may see its consequence first (a child process that got the terminal's Ctrl-C), knows."""
        if self.signum is None:
            self.signum = signum

    def _watch(self, read_fd: int) -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except InterruptedError:
                continue
            if not data:
                return
            for signum in data:
                if signum in HANDLED:
                    self._received(signum)

    def _received(self, signum: int) -> None:
        with self._lock:
            self._count += 1
            first = self._count == 1
            if self.signum is None:
                self.signum = signum
            tokens = list(self._tokens)
        if not first:
            self._exit_now(signum)
        for token in tokens:  # their hooks (telling a child process) run in this thread
            token.cancel()

    def _exit_now(self, signum: int) -> None:
        from onnxport.core.util.atomic import remove_live_temps

        try:
            remove_live_temps()
            text = self.line(signum) + "\n"
            os.write(2, text.encode(sys.stderr.encoding or "utf-8", "backslashreplace"))
        finally:
            os._exit(exit_code(signum))
