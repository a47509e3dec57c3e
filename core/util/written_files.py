"""Which files a command (or an app job) put in place before it was interrupted or cancelled.

`onnxport export --validate --quantize dynamic -o m.onnx` writes m.onnx, then m.int8.onnx, then
benchmarks, then m.report.json; Ctrl-C during the benchmark must not say "nothing was written".
Every write is atomic (core/util/atomic.py: a new file renamed into place), so a file this run
committed is one whose inode (or mtime) changed since the run started. `WrittenFiles(out)` takes
that snapshot of the destination's family in its folder - `out` itself and the names starting
with its stem and a dot (`m.onnx`, `m.onnx.<run id>.data`, `m.int8.onnx`, `m.report.json`) -
and `written()` lists those that are new or replaced. Temps never count. The CLI's interrupted
line and the app's cancel line both say what stayed (`stopped_line`).
"""

from __future__ import annotations

import os
from pathlib import Path


def _family(out: Path) -> dict[str, tuple[int, int]]:
    from onnxport.core.util.atomic import is_temp_name  # not at start: `--version` stays quick

    folder = out.parent if str(out.parent) else Path(".")
    prefix = out.stem + "."
    found: dict[str, tuple[int, int]] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        if (entry.name == out.name or entry.name.startswith(prefix)) and not is_temp_name(entry.name):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[entry.name] = (st.st_ino, st.st_mtime_ns)
    return found


class WrittenFiles:
    """The snapshot of `out`'s family when the command started (see the module docstring)."""

    def __init__(self, out: str | os.PathLike) -> None:
        self.out = Path(out)
        self.before = _family(self.out)

    def written(self) -> list[Path]:
        """The files of the family that are new or replaced since the snapshot, in the order written."""
        now = _family(self.out)
        changed = sorted((stamp[1], name) for name, stamp in now.items() if self.before.get(name) != stamp)
        return [self.out.parent / name for _, name in changed]


def stopped_line(what: str, watcher: WrittenFiles | None) -> str:
    """`interrupted; already written: m.onnx, m.int8.onnx (complete); unfinished files were removed`
    - or `...; nothing was written (...)` when no file was put in place."""
    written = watcher.written() if watcher is not None else []
    if not written:
        return f"{what}; nothing was written (unfinished files were removed)"
    names = ", ".join(str(p) for p in written)
    return f"{what}; already written: {names} (complete); unfinished files were removed"


def interrupted_line(what: str, watcher: WrittenFiles | None) -> str:
    """The CLI's line: `onnxport: ` + `stopped_line`."""
    return f"onnxport: {stopped_line(what, watcher)}"
