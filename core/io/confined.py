"""The one confinement rule: a file a source names is read only from inside the source's folder.

Why: a source names other files - an ONNX model its external data, a checkpoint its `.data`
sidecar, a legacy checkpoint folder its `.pbseq` files, a Hugging Face folder its weight shards
(`model.safetensors.index.json`'s `weight_map`). A crafted source can name `/etc/passwd`, climb
out with `../`, or be a symlink that leaves the folder; the exported model would then hold the
outside file's bytes.

Contract: `confined_file(name, folder, what)` is `name` (relative to `folder`) as a real path
(symlinks resolved) strictly inside `folder` (itself resolved), naming an existing regular file,
with its stat; anything else raises `ConfinementError` (a `CorruptFileError`) naming `what`.
An absolute name, a drive letter or a NUL byte is refused before the file system is asked.
One layout extends the folder: a Hugging Face cache snapshot (`models--X/snapshots/REV/`) holds
symlinks into its repository's `blobs/` (a real folder, not a link); files there count as inside.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from onnxport.core.util.errors import CorruptFileError

_SHOWN_CHARS = 120


class ConfinementError(CorruptFileError):
    """A file named by a source is not a regular file inside the source's folder."""


def _shown(text: str) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def confined_file(name: str, folder: str | os.PathLike, what: str = "file",
                  missing: str | None = None) -> tuple[Path, os.stat_result]:
    """See the module docstring; `missing` names the file when it is not there (default `what`)."""
    shown = _shown(name)
    if not name:
        raise ConfinementError(f"{what} is empty (no file name)")
    if "\x00" in name:
        raise ConfinementError(f"{what} '{shown}' is not a file name")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise ConfinementError(f"{what} '{shown}' is an absolute path; only files in the model's folder are read")
    folder = Path(folder)
    try:
        root = folder.resolve()
        path = (root / name).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
        raise ConfinementError(f"{what} '{shown}' cannot be resolved ({exc})") from None
    if root not in path.parents and not _in_cache_blobs(folder, path):
        raise ConfinementError(f"{what} '{shown}' leads outside the model's folder {folder}; "
                               f"only files in that folder are read")
    try:
        st = os.stat(path)
    except OSError:
        raise ConfinementError(f"{missing or what} '{shown}' not found next to the model") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfinementError(f"{what} '{shown}' is not a regular file")
    return path, st


def _in_cache_blobs(folder: Path, path: Path) -> bool:
    """Whether `folder` is a Hugging Face cache snapshot and `path` lies in its repository's blobs."""
    snapshots = folder.resolve().parent
    repo = snapshots.parent
    if snapshots.name != "snapshots" or not repo.name.startswith("models--"):
        return False
    blobs = repo / "blobs"
    return blobs.is_dir() and not blobs.is_symlink() and path.parent == blobs
