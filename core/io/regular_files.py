"""Only regular files are opened: a named pipe (FIFO) blocks `open()` until something writes to it.

Why: a crafted folder (an unpacked archive, a shared drive) may hold a FIFO, a device or a socket
under any name - `paramtrain_tensors.pbseq`, `model.onnx`. Opening one hangs the CLI or the app
for good (a FIFO) or reads endless bytes (a device). Every reader calls `regular_file(path)`
before it opens a path it was given or found in a folder; folder listings skip such entries.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from onnxport.core.util.errors import OnnxportError, cannot_read

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def regular_file(path: str | Path) -> os.stat_result:
    """The stat of `path` (symlinks followed) if it is a regular file; else OnnxportError naming it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise cannot_read(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
        raise OnnxportError(f"{path}: is {kind}, not a file onnxport can read")
    return st
