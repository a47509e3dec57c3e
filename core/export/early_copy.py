"""Copy the weights an export surely keeps into its data file while the graph passes still run.

Why: at LLM scale an export is seconds of kernel copying (`copy_file_range`) plus about a second
of Python over the graph; the copy needs no Python, so it runs in a thread and the export costs
about the larger of the two instead of their sum (figures: docs/performance.md).

Contract:
- `surely_kept(model, plan, params, folder)` names the weights the written model will hold byte for
  byte, with the file bytes they come from (kept by the prune plan, stored in a file, read by a
  node folding can never remove). It under-approximates: a name it misses is copied later.
- `EarlyCopy(fd, path, spans)` copies those spans in a thread into the export's temp data file,
  page-aligned, at offsets fixed up front (`layout`, `end`), so the writer appends after `end`.
  `wait(report, ...)` joins it (progress and cancel on the calling thread) and re-raises its
  error; `stop()` ends it early; `close()` stops it and closes `fd`, once. The thread touches
  nothing but `fd` and the source files it reads."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import threading
from collections import deque
from collections.abc import Mapping

import onnx

from onnxport.core.export.wire_format import PAGE
from onnxport.core.graph.fold_ops import FOLDERS
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.io.external_data import external_reference
from onnxport.core.io.parameter_set import FileSpan, ParamTensor
from onnxport.core.util.errors import CorruptFileError
from onnxport.core.util.progress import Reporter

CHUNK = 64 << 20  # the stop flag is looked at between chunks
WRITEBACK_LAG_CHUNKS = 16  # writeback is started this far (1 GB) behind the copy; see start_writeback
WAIT_TICK = 0.1  # seconds between progress reports while waiting for the copy
MIN_BYTES = 1 << 20  # smaller weights are not worth a head start


def surely_kept(model: onnx.ModelProto, plan: PrunePlan, params: Mapping[str, ParamTensor] | None = None,
                folder: os.PathLike | None = None, fold: bool = True) -> list[tuple[str, FileSpan]]:
    """(name, span) of the weights the export writes unchanged, in the order the export lists its
    constants (plan.initializers, then plan.parameter_inputs; see the module docstring): a source
    initializer in external data, resolved (and confined) against `folder`, or a checkpoint value
    (`params`) that names its bytes in a file. `fold` False: the export folds nothing, so every
    such weight the plan keeps is kept."""
    params = params if params is not None else {}
    by_name = {t.name: t for t in model.graph.initializer}
    candidates: dict[str, object] = {}  # name -> ParamTensor or external TensorProto
    for name in plan.initializers:
        if name in params:
            candidates[name] = params[name]
        elif folder is not None and by_name[name].data_location == onnx.TensorProto.EXTERNAL:
            candidates[name] = by_name[name]
    for name in plan.parameter_inputs:
        candidates[name] = params[name]
    if not candidates:
        return []
    nodes = model.graph.node
    dynamic = set(plan.inputs)  # tensors that depend on a graph input: never folded
    sure: set[str] = set()
    for i in plan.node_indices:
        node = nodes[i]
        ins = node.input
        if not fold or node.domain not in ("", "ai.onnx") or node.op_type not in FOLDERS \
                or any(n in dynamic for n in ins):
            dynamic.update(node.output)
            sure.update(n for n in ins if n in candidates)
    spans = []
    for name in [*plan.initializers, *plan.parameter_inputs]:
        if name not in sure:
            continue
        source = candidates[name]
        if isinstance(source, ParamTensor):
            span = source.span
        else:
            ref = external_reference(source, folder)  # confined to the folder, checked
            span = FileSpan(ref.path, ref.offset, ref.length)
        if span is not None and span.length >= MIN_BYTES:
            spans.append((name, span))
    return spans


class EarlyCopy:
    """The copy thread; see the module docstring."""

    def __init__(self, fd: int, path: os.PathLike, spans: list[tuple[str, FileSpan]]) -> None:
        self.fd = fd
        self.path = path
        self._closed = False
        self.layout: dict[str, tuple[FileSpan, int]] = {}  # name -> (source span, offset in the data file)
        pos = 0
        for name, span in spans:
            pos += (-pos) % PAGE
            self.layout[name] = (span, pos)
            pos += span.length
        self.end = pos
        self.total = pos
        _reserve(fd, pos)
        self.done = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="onnxport-early-copy", daemon=True)
        self._thread.start()

    def offset_of(self, name: str, span: FileSpan | None) -> int | None:
        """Where `name` sits in the data file, if it was copied early from exactly `span`."""
        entry = self.layout.get(name)
        return entry[1] if entry is not None and entry[0] == span else None

    def _run(self) -> None:
        sources: dict[object, int] = {}
        behind: deque[tuple[int, int]] = deque()  # copied chunks not yet sent to the disk
        try:
            for path, offset, at, length in _runs(self.layout.values()):
                src = sources.get(path)
                if src is None:
                    src = sources[path] = os.open(path, os.O_RDONLY)
                left = length
                while left:
                    if self._stop.is_set():
                        return
                    n = copy_range(src, self.fd, min(left, CHUNK), offset, at)
                    if n == 0:
                        raise CorruptFileError(f"{path}: truncated (expected {left} more bytes at {offset})")
                    behind.append((at, n))
                    while len(behind) > WRITEBACK_LAG_CHUNKS:
                        start_writeback(self.fd, *behind.popleft())
                    offset, at, left = offset + n, at + n, left - n
                    self.done += n
        except BaseException as exc:  # handed to the writer's thread by wait()
            self.error = exc
        finally:
            for fd in sources.values():
                os.close(fd)

    def wait(self, report: Reporter, done_before: int, total: int) -> None:
        """Join the copy; progress is (`done_before` + copied) / `total`; cancel stops it."""
        while self._thread.is_alive():
            self._thread.join(WAIT_TICK)
            report((done_before + self.done) / total if total else None, "writing parameters")
            try:
                report.check()
            except BaseException:
                self.stop()
                raise
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        self.stop()
        if not self._closed:
            self._closed = True
            os.close(self.fd)


def _runs(layout) -> list[tuple[os.PathLike, int, int, int]]:
    """(source path, source offset, data file offset, length) of the copies to make: tensors that
    follow each other in one source file and in the data file are one copy (a 1B decoder's 114
    weights are 34 runs). Why: between two kernel copies the copying thread needs the GIL, which
    the export's own thread holds while it runs the graph passes: fewer copies, fewer waits."""
    runs: list[list] = []
    for span, at in layout:
        last = runs[-1] if runs else None
        if last is not None and last[0] == span.path and last[1] + last[3] == span.offset and last[2] + last[3] == at:
            last[3] += span.length
        else:
            runs.append([span.path, span.offset, at, span.length])
    return [tuple(run) for run in runs]


def _reserve(fd: int, size: int) -> None:
    """Allocate the copy's region before the writer appends after it, so the file is not grown at
    its end first and filled in out of order (docs/performance.md). Linux's fallocate(2) only: glibc's posix_fallocate
    falls back to writing a byte per block where the file system lacks it (NFSv3: minutes for
    gigabytes), so elsewhere nothing is reserved and the copy just writes."""
    fallocate = _libc("fallocate64", ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    if fallocate is not None:
        fallocate(fd, 0, 0, size)  # -1 where unsupported: nothing reserved, nothing lost


def start_writeback(fd: int, offset: int, count: int) -> None:
    """Have the kernel start writing these bytes to disk now (Linux's sync_file_range(2),
    SYNC_FILE_RANGE_WRITE: it does not wait), so the export's final fsync has less left to
    flush after the copy. The copy starts it `WRITEBACK_LAG_CHUNKS` behind itself: started right
    behind each chunk it made the copy itself wait on a slow disk (docs/performance.md). Elsewhere nothing happens and the final fsync does it all."""
    sync_file_range = _libc("sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    if sync_file_range is not None:
        sync_file_range(fd, offset, count, SYNC_FILE_RANGE_WRITE)


SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _libc(name: str, *argtypes):
    """The C library's `name` returning int, with `argtypes`; None where there is no such function."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


def copy_range(src: int, dst: int, count: int, src_offset: int, dst_offset: int | None = None) -> int:
    """Copy up to `count` bytes from `src` at `src_offset` to `dst` (at `dst_offset`, else at its
    file position) by the kernel (`copy_file_range`: the bytes never enter Python); read and
    write where the kernel cannot (another file system, an old kernel). Returns the bytes copied."""
    try:
        if dst_offset is None:
            return os.copy_file_range(src, dst, count, src_offset)
        return os.copy_file_range(src, dst, count, src_offset, dst_offset)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    view = memoryview(os.pread(src, count, src_offset))
    done = 0
    while done < len(view):
        rest = view[done:]
        done += os.write(dst, rest) if dst_offset is None else os.pwrite(dst, rest, dst_offset + done)
    return done
