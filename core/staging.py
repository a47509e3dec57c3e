"""A private work folder next to an output, committed atomically or removed.

Contract: `Staging(out_path)` makes a hidden temp folder in the destination folder (same file
system, so a rename is atomic). Tools that write files by path (ONNX Runtime's quantizers, onnx's
savers with external data) write there, under the *final* file names, so any external-data
`location` recorded inside the model stays right after the move. `commit(names)` fsyncs the
named files and `os.replace`s them into the destination (data files before the model that refers
to them). Leaving the `with` block removes the folder and everything left in it, on success,
error or cancel alike; an existing destination file is only ever replaced by a complete one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import OnnxportError
from .writer import check_destination, fsync_dir


class Staging:
    def __init__(self, out_path: str | Path) -> None:
        self.out_path = Path(out_path)
        self.folder = check_destination(self.out_path)
        self.dir: Path | None = None

    def __enter__(self) -> Staging:
        try:
            self.dir = Path(tempfile.mkdtemp(prefix=f".{self.out_path.name}.", suffix=".onnxport", dir=self.folder))
        except OSError as exc:
            raise OnnxportError(f"cannot write {self.out_path}: {exc.strerror or exc}") from None
        return self

    def __exit__(self, *exc_info) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def path(self, name: str) -> Path:
        """A path inside the work folder."""
        assert self.dir is not None, "use Staging as a context manager"
        return self.dir / name

    @property
    def final_name(self) -> str:
        return self.out_path.name

    def commit(self, staged_model: Path) -> list[Path]:
        """Move `staged_model` (and the external-data files it refers to) to the destination.

        The staged model must be named like the destination (its data files keep their names).
        Returns the destination paths written.
        """
        from .model_io import load_graph

        staged_model = Path(staged_model)
        model = load_graph(staged_model)
        data_names = sorted({
            entry.value for t in model.graph.initializer for entry in t.external_data if entry.key == "location"
        })
        written: list[Path] = []
        try:
            for name in data_names + [staged_model.name]:
                src = staged_model.parent / name
                dst = self.out_path.parent / (self.out_path.name if name == staged_model.name else name)
                _fsync(src)
                os.chmod(src, 0o644)
                os.replace(src, dst)
                written.append(dst)
            fsync_dir(self.folder)
        except OSError as exc:
            raise OnnxportError(f"cannot write {self.out_path}: {exc.strerror or exc}") from None
        return written


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str | Path, data: dict) -> Path:
    """Write `data` as indented JSON to `path`: temp file in the same folder, fsync, rename."""
    path = Path(path)
    folder = check_destination(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = ""
    except OSError as exc:
        raise OnnxportError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path
