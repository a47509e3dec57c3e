"""Where a run may write: a regular file (or nothing yet), never a file the run reads.

Why: a write renames a complete temp onto its destination. Onto a device or a named pipe that
rename replaces the node itself (as root, `-o /dev/null` would replace /dev/null); onto a file the
run reads (the checkpoint, external data, calibration data) it destroys the input.
Contract:
- `check_kind(dest, folder_ok=False)`: `dest` does not exist, or is a regular file (a symlink to
  one counts), or with `folder_ok` a folder; else `cannot write DEST: it is a named pipe ...`; a
  trailing '/' names a folder (`file_destination`: the CLI's `type=` for `-o FILE`). The atomic
  writer calls it before its temp and its renames; commands call it before any work.
- `check_output(dest, reads)`: `check_kind`, then refuse `dest` when it is the same file (device
  and inode) as one of `reads` (paths, or path -> what it is, named in the message), or when the
  data files the model now at `dest` names (deleted once it is replaced) include one of them; a
  folder in `reads` stands for the regular files directly in it.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from onnxport.core.util.errors import OnnxportError, cannot_write

FOLDER_ENTRIES_MAX = 10_000  # entries of a folder in `reads` compared with the destination

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def names_a_folder(text: str | os.PathLike) -> bool:
    """`text` ends in a path separator: it names a folder, whether or not one is there."""
    return isinstance(text, str) and text.endswith(tuple(s for s in (os.sep, os.altsep, "/") if s))


def file_destination(text: str) -> str:
    """argparse `type=` for an option naming a file to write: `text`, unless it names a folder."""
    if names_a_folder(text):
        raise argparse.ArgumentTypeError(f"'{text}' names a folder (it ends in '/'): give a file name, "
                                         f"e.g. {text.rstrip(os.sep + '/')}/model.onnx")
    return text


def check_kind(dest: str | os.PathLike, folder_ok: bool = False) -> None:
    """Refuse a destination that exists and is not a regular file (or a folder, with `folder_ok`),
    or that names a folder (a trailing '/')."""
    if names_a_folder(dest) and not folder_ok:
        raise cannot_write(dest, "it names a folder (it ends in '/'); give a file name")
    try:
        st = os.stat(dest)
    except OSError:  # not there (or a dangling link): the write creates it, or says why it cannot
        return
    if stat.S_ISREG(st.st_mode) or (folder_ok and stat.S_ISDIR(st.st_mode)):
        return
    raise cannot_write(dest, f"it is {_kind(st.st_mode)}; onnxport replaces only regular files "
                             f"(choose a file name)")


Reads = Mapping[str | os.PathLike, str] | Iterable[str | os.PathLike | None]
AN_INPUT = "a file this run reads"


def _identities(reads: Reads) -> dict[tuple[int, int], tuple[Path, str]]:
    """(device, inode) -> (path, what) of every file in `reads` (folders: their direct files)."""
    found: dict[tuple[int, int], tuple[Path, str]] = {}
    named = reads.items() if isinstance(reads, Mapping) else ((p, AN_INPUT) for p in reads)
    for path, what in named:
        if path is None:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as entries:
                    for i, entry in enumerate(entries):
                        if i >= FOLDER_ENTRIES_MAX:
                            break
                        try:
                            est = entry.stat()
                        except OSError:
                            continue
                        if stat.S_ISREG(est.st_mode):
                            found.setdefault((est.st_dev, est.st_ino), (Path(entry.path), what))
            except OSError:
                continue
        found.setdefault((st.st_dev, st.st_ino), (Path(path), what))
    return found


def check_output(dest: str | os.PathLike, reads: Reads = ()) -> None:
    """See the module docstring: a destination that is not a regular file, or that is one of the
    files this run reads, is refused in one line before any work."""
    check_kind(dest)
    try:
        st = os.stat(dest)
    except OSError:
        return
    identities = _identities(reads)
    found = identities.get((st.st_dev, st.st_ino))
    if found is not None:
        read, what = found
        same = "" if os.path.abspath(read) == os.path.abspath(dest) else f" ({read})"
        raise OnnxportError(f"{dest}: the output would overwrite {what}{same}; choose another name")
    from onnxport.core.util.data_files import previous_data_files  # imports onnx: not at CLI start-up
    for old in previous_data_files(Path(dest)):  # deleted once the new model is in place
        try:
            ost = os.stat(old)
        except OSError:
            continue
        found = identities.get((ost.st_dev, ost.st_ino))
        if found is not None:
            raise OnnxportError(f"{dest}: replacing it would delete {old.name}, {found[1]}; choose another name")
