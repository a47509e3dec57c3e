"""A private work folder next to an output, committed atomically or removed.

Contract: `Staging(out_path)` makes a hidden temp folder in the destination folder (same file
system, so a rename is atomic; `atomic.AtomicWrite` names and tracks it). Tools that write files
by path (ONNX Runtime's quantizers, onnx's savers with external data) write there, under the
*final* file name. `commit(model)` puts the model and the external-data files it names in place
as one unit: each data file gets a name unique to this run (`<name>.<run id>.data`; `data_name`
gives it up front to tools that take a location, else the model's locations are rewritten), the
data files are renamed in before the model, and the data files the previous model named go after
it. Leaving the `with` block removes the folder and everything left in it, on success, error or
cancel alike; an existing destination file is only ever replaced by a complete one.
`write_json_atomic` writes a JSON file the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from onnxport.core.export.writer import check_destination
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.data_files import data_location, external_tensors, previous_data_files
from onnxport.core.util.errors import cannot_write
from onnxport.core.util.progress import Reporter


class Staging:
    def __init__(self, out_path: str | Path) -> None:
        self.out_path = Path(out_path)
        self.folder = check_destination(self.out_path)
        self.dir: Path | None = None
        self._tx = AtomicWrite(self.out_path)

    def __enter__(self) -> Staging:
        self._tx.start()
        self.dir = self._tx.new_dir()
        return self

    def __exit__(self, *exc_info) -> None:
        self._tx.discard()
        self.dir = None

    def path(self, name: str) -> Path:
        """A path inside the work folder."""
        assert self.dir is not None, "use Staging as a context manager"
        return self.dir / name

    @property
    def data_name(self) -> str:
        """The external-data file name to give a tool that writes the final model (unique to this run)."""
        return self._tx.companion("data").name

    def commit(self, staged_model: Path, report: Reporter | None = None,
               data_files: list[str] | None = None) -> list[Path]:
        """Move `staged_model` (and the external-data files it names) to the destination.

        The staged model must be named like the destination. With `report`, its last `check()`
        comes first and then its commit point. `data_files`: the data file names the model uses,
        when the caller knows them (saves reading the model back). Returns the paths written.
        """
        from onnxport.core.io.model_io import load_graph

        staged_model = Path(staged_model)
        model = None
        if data_files is None:
            model = load_graph(staged_model)
            data_files = [data_location(t) for t in external_tensors(model.graph)]
        names = sorted(set(data_files))
        unique = {name: (self.data_name if len(names) == 1 else self._tx.companion(f"{i}.data").name)
                  for i, name in enumerate(names)}
        try:
            if any(name != new for name, new in unique.items()):
                model = model or load_graph(staged_model)
                for tensor in external_tensors(model.graph):
                    for entry in tensor.external_data:
                        if entry.key == "location":
                            entry.value = unique[entry.value]
                for name, new in unique.items():
                    self._tx.rename_inside(staged_model.parent / name, staged_model.parent / new)
                with open(staged_model, "wb") as f:
                    f.write(model.SerializeToString())
        except OSError as exc:
            raise cannot_write(self.out_path, exc) from None
        if report is not None:
            report.check()
            report.commit()
        moves = [(staged_model.parent / new, self.folder / new) for new in unique.values()]
        moves.append((staged_model, self.out_path))
        return self._tx.commit(moves, obsolete=lambda: previous_data_files(self.out_path))

    def commit_files(self, moves: list[tuple[Path, Path]]) -> list[Path]:
        """Rename files staged here onto their destinations (beside `out_path`), the last one being
        the commit point (e.g. a tool's config file, then its model)."""
        return self._tx.commit(moves)


def write_json_atomic(path: str | Path, data: dict) -> Path:
    """Write `data` as indented JSON to `path`: temp file in the same folder, fsync, rename."""
    path = Path(path)
    check_destination(path)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    with AtomicWrite(path) as tx:
        fd, tmp = tx.new_file()
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise cannot_write(path, exc) from None
        tx.commit([(tmp, path)])
    return path
