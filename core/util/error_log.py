"""The one error log of the CLI and the app: where an unexpected error's traceback goes.

`log_error(title, exc, traceback_text)` appends an entry to `error_log_path()` (the user's cache
folder: `~/.cache/onnxport/errors.log` on Linux, where Qt's generic cache location is) and returns
the path, or None when it could not be written. An entry is a header line (`=== <time> <title>:
<type>: <message>`) and the traceback's lines, each indented and escaped (`text.shown`): a file
name holding a newline cannot forge an entry, and ESC/BEL never reach a terminal showing the log.
Only a regular file is written: opened O_NONBLOCK|O_NOFOLLOW and checked with fstat, so a FIFO,
a device or a symlink put there is refused at once, never waited on nor written through. An entry
is bounded (MAX_ENTRY_LINES lines of at most MAX_LINE_CHARS) and the log is kept under
MAX_LOG_BYTES: a bigger one is copied over `errors.log.1` (its newest MAX_LOG_BYTES), then emptied.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
import time
from pathlib import Path

from onnxport.core.util.text import clipped, shown

MAX_LOG_BYTES = 1 << 20
MAX_LINE_CHARS = 1000
MAX_ENTRY_LINES = 400  # a traceback's first lines and its last (where the error is) are kept
_HEAD_LINES = 100
_SAFE_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_LOCK = threading.Lock()  # the app's GUI thread and its workers may log at once


def cache_folder() -> Path:
    """The user's cache folder, as Qt's GenericCacheLocation names it (the app's log stays where it was)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) / "cache" if local else Path.home() / "AppData" / "Local" / "cache"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"


def error_log_path() -> Path:
    return cache_folder() / "onnxport" / "errors.log"


def log_line(text: str) -> str:
    """`text` as one line of the log: controls escaped, at most MAX_LINE_CHARS (the end kept)."""
    return clipped(shown(text), MAX_LINE_CHARS)


def log_entry(title: str, exc: BaseException, traceback_text: str) -> str:
    """The entry `log_error` writes (see the module docstring)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    lines = traceback_text.rstrip().splitlines()
    if len(lines) > MAX_ENTRY_LINES:
        left = len(lines) - MAX_ENTRY_LINES
        lines = lines[:_HEAD_LINES] + [f"... {left} lines left out ..."] + lines[-(MAX_ENTRY_LINES - _HEAD_LINES):]
    body = "".join(f"    {log_line(line)}\n" for line in lines)
    return f"=== {when} {log_line(f'{title}: {type(exc).__name__}: {exc}')}\n{body}\n"


def log_error(title: str, exc: BaseException, traceback_text: str) -> Path | None:
    """Append `exc`'s entry to the log; its path, or None when it could not be written (a full
    disk, a FIFO in its place...)."""
    path = error_log_path()
    data = log_entry(title, exc, traceback_text).encode("utf-8", "backslashreplace")
    with _LOCK:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_log(path)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        except OSError:
            return None
    return path


def _open_log(path: Path) -> int:
    """A descriptor appending to `path`, a regular file under MAX_LOG_BYTES (rotated when over)."""
    fd = _open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        if size > MAX_LOG_BYTES:
            older = os.pread(fd, MAX_LOG_BYTES, size - MAX_LOG_BYTES)
            previous = _open_regular(path.with_name(path.name + ".1"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                _write_all(previous, older)
            finally:
                os.close(previous)
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_regular(path: Path, flags: int) -> int:
    fd = os.open(path, flags | _SAFE_FLAGS, 0o600)  # a FIFO: ENXIO or opened without waiting; a symlink: ELOOP
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
