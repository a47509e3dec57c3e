"""Where an error's technical details go: a log file, not the dialog.

`log_error(title, exc, traceback_text)` appends the traceback to `error_log_path()` (the user's
cache folder, `~/.cache/onnxport/errors.log` on Linux; kept under `MAX_LOG_BYTES`, the older half
moved to `errors.log.1`) and returns the path, or None when it could not be written.
`details_in_words(exc, log_path)` is what "Show Details…" says instead: the whole message, the
hint, what caused it (one line each), and the file that holds the traceback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from onnxport.core.util.errors import OnnxportError

MAX_LOG_BYTES = 1 << 20
MAX_CAUSES = 5


def error_log_path() -> Path:
    cache = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericCacheLocation)
    return Path(cache or Path.home() / ".cache") / "onnxport" / "errors.log"


def log_error(title: str, exc: BaseException, traceback_text: str) -> Path | None:
    path = error_log_path()
    entry = (f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {title}: {type(exc).__name__}: {exc}\n"
             f"{traceback_text.rstrip()}\n\n")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        with open(path, "a", encoding="utf-8") as log:
            log.write(entry)
    except OSError:
        return None
    return path


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def details_in_words(exc: BaseException, log_path: Path | None) -> str:
    if isinstance(exc, OnnxportError):
        lines = [" ".join(str(exc).split())]
        if exc.hint:
            lines.append(f"What to try: {exc.hint}")
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
