"""How a command's end reaches its reader when something goes wrong.

- A user error is one line on stderr (`onnxport: error: ...`); with `--json` the same error is
  also a JSON object on stdout (`{"error": {"message": ..., "kind": ...}}`), so a script that parses
  stdout always gets JSON, never an empty string; `parse_args` does the same for usage errors
  (kind `UsageError`: a missing `-o`, an unknown option) when `--json` is among the arguments.
- Any other exception (a bug, a library failing in a way the core did not foresee) is one line
  `internal error: <type>: <message> (details in <log>)`, exit 70 (EX_SOFTWARE), its traceback
  in the error log the app shares (core/util/error_log.py); JSON kind `InternalError`, `log`.
- A reader that closed stdout early (`onnxport inspect --json | head`) ends the run quietly, as
  Unix tools do: exit 141 (128 + SIGPIPE), no message, no traceback. `stdout_closed()` tells a
  closed stdout from another broken pipe (e.g. a child process's), which stays an error.
- `silence_stdout()` points fd 1 at /dev/null so the interpreter's last flush of what was still
  buffered does not print "Exception ignored ... BrokenPipeError" (the console entry calls it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import signal
import sys
import traceback

from onnxport.core.util.error_log import error_log_path, log_error
from onnxport.core.util.text import first_line, shown

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
EXIT_INTERNAL_ERROR = 70  # sysexits.h EX_SOFTWARE: not the input's fault; the details are in the log


def report_error(line: str, kind: str, as_json: bool, **extra: str) -> None:
    """The error's one line on stderr; with `as_json` its JSON object on stdout too (with `extra`)."""
    print(f"onnxport: error: {shown(line)}", file=sys.stderr)  # names from files: no terminal escapes
    if as_json:
        try:
            json.dump({"error": {"message": line, "kind": kind, **extra}}, sys.stdout, indent=2)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # nobody reads stdout (any more): stderr said it
            pass


def internal_error_exit(exc: Exception, written: str, as_json: bool, argv: list[str] | None) -> int:
    """An unforeseen exception as one line naming the log that holds its traceback; the exit code.
    `written`: what the run already put in place ("; already written: ..." or "")."""
    command = " ".join(["onnxport", *(sys.argv[1:] if argv is None else argv)])
    log = log_error(command, exc, traceback.format_exc())
    where = f"details in {log}" if log is not None else f"no details: {error_log_path()} could not be written"
    report_error(f"internal error: {_what(exc)} ({where}){written}", "InternalError", as_json,
                 type=type(exc).__name__, log=str(log or ""))
    return EXIT_INTERNAL_ERROR


def _what(exc: Exception) -> str:
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError)"
    text = first_line(exc)
    return text if text == type(exc).__name__ else f"{type(exc).__name__}: {text}"


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone: poll reports an error on it."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an in-memory stream: not a pipe
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def silence_stdout() -> None:
    """Point fd 1 at /dev/null (see the module docstring); best effort."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`; with `--json` among the arguments a usage error (argparse's exit
    2, its lines still on stderr) is also a JSON error on stdout."""
    if "--json" not in (sys.argv[1:] if argv is None else argv):
        return parser.parse_args(argv)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parser.parse_args(argv)
    except SystemExit as exc:
        text = captured.getvalue()
        sys.stderr.write(text)
        if exc.code == 2:  # a usage error (--help exits 0)
            lines = text.strip().splitlines() or ["invalid arguments"]
            message = lines[-1].split(": error: ", 1)[-1]
            json.dump({"error": {"message": message, "kind": "UsageError"}}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        raise
