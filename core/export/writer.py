"""Write a model whose initializers are `ConstTensor`s, streaming, atomically.

Contract: in, a model *skeleton* (everything but initializers) and the constants; out, the file
(with external data, also `<file>.<run id>.data`), bit-for-bit what `onnx.save` would store:
- streamed: the protobuf is written field by field (the graph's length is a padded 5-byte varint
  patched at the end), and weights already in a file are copied by the kernel (`copy_file_range`),
  never entering Python memory;
- atomic, through `util.atomic.AtomicWrite`: a failure or cancel removes the temps and leaves an
  existing destination untouched; a model and its run-named data file are replaced as one unit
  (the data file the previous model named is deleted after the rename);
- only for a model ONNX Runtime would load: `graph.runnable` checks first that every node reads
  only tensors defined before it and that the outputs are defined; otherwise nothing is touched;
- `verify(path)`, when given, runs on the complete written model before the commit: if it raises,
  nothing is put in place (`export --validate`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.export.early_copy import EarlyCopy, copy_range
from onnxport.core.export.wire_format import (
    GRAPH_INITIALIZER_TAG,
    MODEL_GRAPH_TAG,
    PAGE,
    inline_prefix,
    padded_varint,
    tensor_header,
    varint,
)
from onnxport.core.graph.const_tensors import ConstTensor
from onnxport.core.graph.runnable import check_runnable
from onnxport.core.io.model_io import copy_model
from onnxport.core.io.parameter_set import FileSpan, c_contiguous
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.data_files import previous_data_files
from onnxport.core.util.errors import CorruptFileError, OnnxportError, cannot_write
from onnxport.core.util.out_paths import check_kind
from onnxport.core.util.progress import Reporter

PROTOBUF_LIMIT = 2**31 - 1
EXTERNAL_THRESHOLD = 1024  # with external data, tensors smaller than this stay inline
EXTERNAL_ALIGN = PAGE  # external tensors start page-aligned so runtimes can map them
COPY_CHUNK = 64 << 20  # check for cancel and report progress every 64 MiB



class _FdSink:
    """Unbuffered fd writer with a small staging buffer; tracks the position."""

    def __init__(self, fd: int, start: int = 0) -> None:
        self.fd = fd
        self.pos = start  # appends from here (bytes before it are another writer's: early_copy)
        os.lseek(fd, start, os.SEEK_SET)
        self._buf = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        if len(data) < (1 << 16):
            self._buf += data
            self.pos += len(data)
            if len(self._buf) >= (1 << 20):
                self.flush()
            return
        self.flush()
        self._write_all(memoryview(data).cast("B"))
        self.pos += len(data)

    def flush(self) -> None:
        if self._buf:
            self._write_all(memoryview(self._buf))
            self._buf = bytearray()

    def _write_all(self, view: memoryview) -> None:
        while len(view):
            n = os.write(self.fd, view)
            view = view[n:]

    def pad_to(self, alignment: int) -> None:
        gap = (-self.pos) % alignment
        if gap:
            self.write(b"\0" * gap)

    def copy_span(self, src_fd: int, span: FileSpan, report: Reporter, done: list[int], total: int) -> None:
        self.flush()
        offset, left = span.offset, span.length
        while left:
            step = min(left, COPY_CHUNK)
            n = copy_range(src_fd, self.fd, step, offset)
            if n == 0:
                raise CorruptFileError(f"{span.path}: truncated (expected {span.length} bytes at {span.offset})")
            offset += n
            left -= n
            self.pos += n
            done[0] += n
            report(done[0] / total if total else None, "writing parameters")
            report.check()


@dataclass
class WriteResult:
    path: Path
    size_bytes: int
    data_path: Path | None
    data_bytes: int


def _raw_view(array: np.ndarray) -> memoryview:
    array = c_contiguous(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return memoryview(array.reshape(-1).view(np.uint8))


def check_destination(out_path: Path) -> Path:
    """The folder `out_path` will be written in; a clear error if that cannot work."""
    folder = out_path.parent if str(out_path.parent) else Path(".")
    if out_path.is_dir():
        raise cannot_write(out_path, "it is a folder; give a file name such as model.onnx")
    check_kind(out_path)  # a device or a pipe: the rename would replace the node itself
    if not folder.is_dir():
        raise cannot_write(out_path, f"folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise cannot_write(out_path, f"folder {folder} is not writable")
    return folder


def write_model(
    skeleton: onnx.ModelProto,
    consts: list[ConstTensor],
    out_path: str | Path,
    *,
    external_data: bool = False,
    report: Reporter | None = None,
    verify: Callable[[Path], None] | None = None,
    tx: AtomicWrite | None = None,
    early: EarlyCopy | None = None,
) -> WriteResult:
    """See the module docstring. `tx`: the write to go through when the caller has begun it (else
    one is begun here); `early`: the data file a copy already fills (`export.early_copy`, a temp
    of `tx`), used if it fits these constants and external data, else emptied; it is closed here."""
    out_path = Path(out_path)
    report = report or Reporter()
    sources: dict[Path, int] = {}
    fds: list[int] = []
    try:
        check_destination(out_path)
        check_runnable(skeleton.graph, f"{out_path}: not written", [c.name for c in consts])
        with nullcontext(tx) if tx is not None else AtomicWrite(out_path) as tx:
            fd, tmp_model = tx.new_file()
            fds.append(fd)
            early = _usable(early, consts, external_data)
            data_path, tmp_data, data_sink = _data_file(tx, early, fds) if external_data else (None, None, None)
            sink = _FdSink(fd)
            length_at, graph_len = _write_graph(skeleton, consts, sink, data_sink, data_path, early, sources, report)
            if not external_data and sink.pos > PROTOBUF_LIMIT:
                raise OnnxportError(
                    f"the model is {sink.pos / 2**30:.2f} GiB, over protobuf's 2 GiB limit",
                    hint="use --external-data auto or always",
                )
            os.pwrite(fd, padded_varint(graph_len), length_at)
            report.check()
            report(None, "syncing to disk")
            os.fsync(fd)
            data_bytes = 0
            moves = [(tmp_model, out_path)]
            if data_sink is not None:
                data_sink.flush()
                os.fsync(data_sink.fd)
                data_bytes = data_sink.pos
                moves.insert(0, (tmp_data, data_path))
            while fds:
                os.close(fds.pop())
            if verify is not None:
                report.check()
                verify(_private_copy(tx, out_path, tmp_model, (tmp_data, data_path) if external_data else None))
            report.check()  # the last chance to cancel: nothing is replaced yet
            report.commit()
            tx.commit(moves, obsolete=lambda: previous_data_files(out_path))
            return WriteResult(out_path, sink.pos, data_path, data_bytes)
    except OSError as exc:
        raise cannot_write(out_path, exc) from None
    finally:
        if early is not None:
            early.close()
        for fd_ in list(sources.values()) + fds:
            os.close(fd_)


def _data_file(tx: AtomicWrite, early: EarlyCopy | None, fds: list[int]) -> tuple[Path, Path, _FdSink]:
    """The external data file: its final path (unique to this run: see the module docstring), its
    temp and a sink writing it (after what `early` copied, when it is the early copy's file)."""
    data_path = tx.companion("data")
    if early is not None:
        return data_path, early.path, _FdSink(early.fd, start=early.end)
    dfd, tmp_data = tx.new_file()
    fds.append(dfd)
    return data_path, tmp_data, _FdSink(dfd)


def _write_graph(skeleton: onnx.ModelProto, consts: list[ConstTensor], sink: _FdSink, data_sink: _FdSink | None,
                 data_path: Path | None, early: EarlyCopy | None, sources: dict[Path, int],
                 report: Reporter) -> tuple[int, int]:
    """The model's fields, then its graph with every constant appended (inline, or its header here
    and its bytes in the data file). Returns where the graph's length goes and that length."""
    graph_bytes = skeleton.graph.SerializeToString()
    sink.write(copy_model(skeleton, graph=False).SerializeToString())
    sink.write(MODEL_GRAPH_TAG)
    sink.flush()
    length_at = sink.pos
    sink.write(padded_varint(0))
    graph_start = sink.pos
    sink.write(graph_bytes)
    total = sum(c.nbytes for c in consts) or 1
    done = [0]
    data_name = data_path.name if data_path is not None else ""
    for const in consts:
        report.check()
        at = early.offset_of(const.name, const.span) if early is not None else None
        if at is not None:  # its bytes are (being) copied there: the header only
            _write_external_header(const, const.elem_type, const.shape, sink, data_name, at, const.nbytes)
            continue
        _write_const(const, sink, data_sink, data_name, sources, report, done, total)
    if early is not None:
        early.wait(report, done[0], total)
        done[0] += early.total
    sink.flush()
    return length_at, sink.pos - graph_start


def _usable(early: EarlyCopy | None, consts: list[ConstTensor], external_data: bool) -> EarlyCopy | None:
    """`early` if every tensor it copies is one of `consts`, unchanged, written externally; else
    None, with its copy stopped and its file emptied (the writer then fills it from the start)."""
    if early is None:
        return None
    spans = {c.name: c.span for c in consts}
    if external_data and all(spans.get(name) == span for name, (span, _) in early.layout.items()):
        return early
    early.stop()
    os.ftruncate(early.fd, 0)
    if external_data:  # the data file after all: the writer starts it over
        early.layout.clear()
        early.end = early.total = 0
        return early
    early.close()
    return None


def _private_copy(tx: AtomicWrite, out_path: Path, tmp_model: Path,
                  data: tuple[Path, Path] | None) -> Path:
    """The written model under its final name in a private temp folder (hard links: no copy),
    beside its data file under the name the model gives it, for a check to open before commit."""
    folder = tx.new_dir()
    pairs = [(tmp_model, folder / out_path.name)] + ([(data[0], folder / data[1].name)] if data else [])
    for src, dst in pairs:
        try:
            os.link(src, dst)
        except OSError:  # a file system without hard links: a copy (only a check reads it)
            shutil.copyfile(src, dst)
    return folder / out_path.name


def _write_const(const: ConstTensor, sink: _FdSink, data_sink: _FdSink | None, data_name: str,
                 sources: dict[Path, int], report: Reporter, done: list[int], total: int) -> None:
    external = data_sink is not None and const.nbytes >= EXTERNAL_THRESHOLD
    if const.proto is not None and not external:
        body = const.proto.SerializeToString()
        sink.write(GRAPH_INITIALIZER_TAG + varint(len(body)))
        sink.write(body)
        done[0] += const.nbytes
        return
    if const.span is not None and const.shape is not None:
        length, payload = const.span.length, None
        elem_type, dims = const.elem_type, const.shape
    else:
        values = const.values()
        if values.dtype == object:  # strings: let protobuf encode them
            body = onnx.numpy_helper.from_array(values, const.name).SerializeToString()
            sink.write(GRAPH_INITIALIZER_TAG + varint(len(body)))
            sink.write(body)
            return
        elem_type = _elem_type_for(values, const.elem_type)
        dims, payload = values.shape, _raw_view(values)
        length = len(payload)
    if external:
        data_sink.pad_to(EXTERNAL_ALIGN)
        _write_external_header(const, elem_type, dims, sink, data_name, data_sink.pos, length)
        target = data_sink
    else:
        sink.write(inline_prefix(tensor_header(const.name, elem_type, dims), length))
        target = sink
    if payload is None:
        src = sources.get(const.span.path)
        if src is None:
            src = sources[const.span.path] = os.open(const.span.path, os.O_RDONLY)
        target.copy_span(src, const.span, report, done, total)
    else:
        target.write(payload)
        done[0] += length
        report(done[0] / total, "writing parameters")


def _write_external_header(const: ConstTensor, elem_type: int, dims, sink: _FdSink, data_name: str,
                           offset: int, length: int) -> None:
    header = tensor_header(const.name, elem_type, dims, (data_name, offset, length))
    sink.write(GRAPH_INITIALIZER_TAG + varint(len(header)))
    sink.write(header)


def _elem_type_for(values: np.ndarray, declared: int) -> int:
    """The ONNX type of computed values; bfloat16/float8 stored as same-width ints keep `declared`."""
    try:
        actual = onnx.helper.np_dtype_to_tensor_dtype(values.dtype)
    except (KeyError, ValueError, TypeError):
        return declared
    if actual != declared and values.dtype.itemsize == onnx.helper.tensor_dtype_to_np_dtype(declared).itemsize \
            and values.dtype.kind in "ui" and declared not in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8,
                                                                 onnx.TensorProto.INT16, onnx.TensorProto.UINT16):
        return declared
    return actual
