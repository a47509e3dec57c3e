"""Stream a planned checkpoint's bytes into its files, atomically (for `checkpoint_writer`).

Contract: `write_files(path, meta, inline, external_items, external, total, report)` writes
`meta` (the flatbuffer metadata) then, for each inline item, padding up to `item.raw.pos`, the
uint32 length and the tensor's bytes; with `external`, the external items' bytes go to
`<path>.data` at `item.raw.pos`. Bytes come from a `ParamTensor`'s file span (copied by the
kernel with copy_file_range, never entering Python memory), else from its loader or the numpy
array, one tensor at a time, in 64 MiB chunks with progress and cancel checks. Temp files live in
the destination folder (`atomic.AtomicWrite`); they are fsynced and renamed over `path` (the
`.data` first: ORT finds it by that fixed name) only when everything is written, under a lock on
the folder so two writers never interleave their renames. On any failure or cancel they are
removed and existing files stay as they were. OS errors become `OnnxportError` naming the file.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from pathlib import Path

import numpy as np

from onnxport.core.io.checkpoint import DATA_SUFFIX
from onnxport.core.io.parameter_set import ParamTensor, c_contiguous
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

CHUNK = 64 << 20  # report progress / check for cancel every 64 MiB
_COPY_FILE_RANGE = getattr(os, "copy_file_range", None)  # Linux only


def check_destination(path: Path) -> Path:
    """The folder `path` will be written in; OnnxportError if it cannot be."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise OnnxportError(f"{path}: the folder {folder} does not exist")
    if path.is_dir():
        raise OnnxportError(f"{path}: is a folder, not a checkpoint file")
    return folder


def write_files(path: Path, meta: bytes, inline: list, external_items: list, external: bool,
                total: int, report: Reporter) -> Path:
    """Write the files (see the module docstring); `inline`/`external_items` are the writer's items."""
    check_destination(path)
    sources: dict[Path, int] = {}
    done = [0]
    try:
        try:
            with AtomicWrite(path) as tx:
                moves = []
                if external:
                    fd, tmp = tx.new_file()
                    with _Sink(fd) as sink:
                        for item in external_items:
                            sink.zeros(item.raw.pos - sink.pos)
                            _write_values(sink, item, sources, report, done, total)
                    moves.append((tmp, path.with_name(path.name + DATA_SUFFIX)))
                fd, tmp = tx.new_file()
                with _Sink(fd) as sink:
                    sink.write(meta)
                    for item in inline:
                        sink.zeros(item.raw.pos - sink.pos)
                        sink.write(struct.pack("<I", item.nbytes))
                        _write_values(sink, item, sources, report, done, total)
                moves.append((tmp, path))
                report(1.0, "saving checkpoint")
                report.check()  # the last chance to cancel: nothing is replaced yet
                report.commit()
                tx.commit(moves)
        except OSError as exc:
            raise OnnxportError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        for fd in sources.values():
            os.close(fd)
    return path


def _write_values(sink: _Sink, item, sources: dict[Path, int], report: Reporter, done: list[int],
                  total: int) -> None:
    value = item.value
    span = value.span if isinstance(value, ParamTensor) else None
    if span is not None and span.length == item.nbytes:
        src = sources.get(span.path)
        if src is None:
            try:
                src = sources[span.path] = os.open(span.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            except OSError as exc:
                raise OnnxportError(f"{span.path}: cannot read ({exc.strerror or exc})") from None
        for start in range(0, item.nbytes, CHUNK):
            n = min(CHUNK, item.nbytes - start)
            sink.copy_from(src, span.offset + start, n, span.path)
            done[0] += n
            report(done[0] / total, "writing checkpoint")
            report.check()
        return
    array = value.array() if isinstance(value, ParamTensor) else np.asarray(value)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    array = c_contiguous(array)
    if array.nbytes != item.nbytes:
        raise OnnxportError(f"tensor '{item.name}': {array.nbytes} bytes of values, {item.nbytes} expected "
                            f"for shape {list(item.shape)}")
    view = memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(b"")
    for start in range(0, item.nbytes, CHUNK):
        chunk = view[start:start + CHUNK]
        sink.write(chunk)
        done[0] += len(chunk)
        report(done[0] / total, "writing checkpoint")
        report.check()


class _Sink:
    """Sequential writes to a file descriptor, small ones batched; fsync and close on exit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pos = 0  # bytes written so far, batched ones included
        self.pending = bytearray()

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
                os.fsync(self.fd)
        finally:
            os.close(self.fd)

    def write(self, data) -> None:
        self.pos += len(data)
        if len(data) < 1 << 16:
            self.pending += data
            if len(self.pending) >= 1 << 20:
                self.flush()
            return
        self.flush()
        self._write_all(memoryview(data).cast("B"))

    def zeros(self, count: int) -> None:
        if count:
            self.write(bytes(count))

    def flush(self) -> None:
        if self.pending:
            self._write_all(memoryview(self.pending))
            self.pending = bytearray()

    def _write_all(self, view: memoryview) -> None:
        while view:
            view = view[os.write(self.fd, view):]

    def copy_from(self, src: int, offset: int, count: int, label: Path) -> None:
        """Append `count` bytes of file `src` from `offset`, by the kernel where it can."""
        self.flush()
        while count:
            n = -1
            if _COPY_FILE_RANGE is not None:
                try:
                    n = _COPY_FILE_RANGE(src, self.fd, count, offset)
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF):
                        raise
            if n < 0:  # no kernel copy here: through a bounded buffer
                os.lseek(src, offset, os.SEEK_SET)
                data = os.read(src, min(count, CHUNK))
                self._write_all(memoryview(data))
                n = len(data)
            if n == 0:
                raise OnnxportError(f"{label}: the file is shorter than its checkpoint says (changed on disk?)")
            offset, count, self.pos = offset + n, count - n, self.pos + n
