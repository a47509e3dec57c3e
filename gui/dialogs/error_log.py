"""Where an error's technical details go: the one error log (core/util/error_log.py), not the dialog.

`log_error(title, exc, traceback_text)` appends the traceback to `error_log_path()` (the user's
cache folder, `~/.cache/onnxport/errors.log` on Linux, shared with the CLI; escaped single lines,
a regular file only, bounded) and returns the path, or None when it could not be written.
`details_in_words(exc, log_path)` is what "Show Details…" says instead: the whole message, the
hint, what caused it (one line each), and the file that holds the traceback.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.util.error_log import error_log_path, log_error
from onnxport.core.util.errors import OnnxportError

from .app_hints import app_hint

__all__ = ["details_in_words", "error_log_path", "log_error"]

MAX_CAUSES = 5


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def details_in_words(exc: BaseException, log_path: Path | None) -> str:
    if isinstance(exc, OnnxportError):
        lines = [" ".join(str(exc).split())]
        if exc.hint:
            lines.append(f"What to try: {app_hint(exc)}")
    else:
        lines = [f"onnxport met an error it does not know how to explain ({_line(exc)}).",
                 "This is a bug in onnxport, not a problem with your files: please report it with the log below."]
    cause, seen = exc.__cause__ or exc.__context__, 0
    while cause is not None and seen < MAX_CAUSES:
        lines.append(f"Caused by {_line(cause)}")
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    lines.append("")
    lines.append(f"The technical details (a Python traceback) were written to {log_path}." if log_path else
                 f"The technical details could not be written to {error_log_path()}.")
    return "\n".join(lines)
