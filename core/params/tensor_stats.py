"""A weight's numbers at a glance: dtype, shape, min/max/mean/std, zeros, non-finite counts, a
histogram and a page of its values, read in bounded chunks.

Why: a user looking inside a 2 GB weight must not make the app (or the CLI) load it whole.
`TensorValues` says where a tensor's values are: a span of a file (external data, a checkpoint:
read `CHUNK_BYTES` at a time into one reused buffer, never mapped whole) or an array already in
memory (an inline initializer). `tensor_stats(values, bins)` makes two passes over the chunks:
the counts, extremes and moments (float64, chunks combined exactly as one pass over all values
would: Chan's formula), then the histogram of the finite values over [min, max] with `bins`
bins (`np.histogram`'s edges). `tensor_page(values, start, count)` reads only the values asked
for. bfloat16 is widened to float32; strings and packed 4-bit types are refused in one line.
Cancel is checked between chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from onnxport.core.io.mapped import PACKED_4BIT, storage_dtype
from onnxport.core.io.parameter_set import FileSpan, dtype_name
from onnxport.core.util.errors import CorruptFileError, OnnxportError
from onnxport.core.util.progress import CancelToken

CHUNK_BYTES = 16 << 20  # one chunk's bytes (and the float64 copy of it: 4x for float16)
BINS = 64
BFLOAT16 = onnx.TensorProto.BFLOAT16


@dataclass
class TensorValues:
    """Where a tensor's values are: `span` of a file, or `array()` in memory."""

    name: str
    elem_type: int
    shape: tuple[int, ...]
    span: FileSpan | None = None
    array: Callable[[], np.ndarray] | None = None
    source: str = ""  # where it comes from, for the reader ("checkpoint", "initializer (external data)")

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def chunks(self, chunk_bytes: int = CHUNK_BYTES, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        """The flat values [start, stop), a chunk at a time, as stored (the buffer is reused: copy to keep)."""
        dtype = _stored_dtype(self.name, self.elem_type)
        stop = self.count if stop is None else min(stop, self.count)
        per = max(1, chunk_bytes // dtype.itemsize)
        if self.span is None:
            flat = np.asarray(self.array()).reshape(-1)
            for at in range(start, stop, per):
                yield flat[at:min(at + per, stop)]
            return
        if self.span.length < self.count * dtype.itemsize:
            raise CorruptFileError(f"tensor '{self.name}': {self.span.length} bytes hold fewer than its "
                                   f"{self.count} values")
        buf = bytearray(min(per, max(stop - start, 0)) * dtype.itemsize)
        with open(self.span.path, "rb", buffering=0) as f:
            f.seek(self.span.offset + start * dtype.itemsize)
            for at in range(start, stop, per):
                n = min(per, stop - at)
                view = memoryview(buf)[:n * dtype.itemsize]
                if f.readinto(view) != len(view):
                    raise CorruptFileError(f"{self.span.path}: truncated inside tensor '{self.name}'")
                yield np.frombuffer(view, dtype=dtype)


@dataclass
class TensorStats:
    name: str
    dtype: str
    shape: list[int]
    count: int
    min: float | None  # of the finite values (None: none)
    max: float | None
    mean: float | None
    std: float | None  # population (numpy's default, ddof=0)
    zeros: int
    nan: int
    posinf: int
    neginf: int
    histogram: list[int] = field(default_factory=list)
    edges: list[float] = field(default_factory=list)
    source: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _stored_dtype(name: str, elem_type: int) -> np.dtype:
    dtype = storage_dtype(elem_type)
    if dtype is None or dtype == np.dtype(object) or elem_type in PACKED_4BIT:
        raise OnnxportError(f"tensor '{name}' is {dtype_name(elem_type)}: no statistics for that type")
    return dtype


def as_numbers(chunk: np.ndarray, elem_type: int) -> np.ndarray:
    """A chunk as float64 (bfloat16's stored uint16 widened to float32 first)."""
    if elem_type == BFLOAT16:
        chunk = (chunk.astype(np.uint32) << 16).view(np.float32)
    return chunk.astype(np.float64)


def tensor_stats(values: TensorValues, bins: int = BINS, cancel: CancelToken | None = None,
                 chunk_bytes: int = CHUNK_BYTES) -> TensorStats:
    """See the module docstring."""
    count = n = zeros = nan = posinf = neginf = 0
    mean = m2 = 0.0
    low, high = np.inf, -np.inf
    for chunk in values.chunks(chunk_bytes):
        if cancel is not None:
            cancel.check()
        x = as_numbers(chunk, values.elem_type)
        count += x.size
        zeros += int(np.count_nonzero(x == 0))
        nan += int(np.count_nonzero(np.isnan(x)))
        posinf += int(np.count_nonzero(x == np.inf))
        neginf += int(np.count_nonzero(x == -np.inf))
        finite = x[np.isfinite(x)]
        if finite.size:
            low, high = min(low, float(finite.min())), max(high, float(finite.max()))
            k, chunk_mean = finite.size, float(finite.mean())
            delta = chunk_mean - mean
            m2 += float(((finite - chunk_mean) ** 2).sum()) + delta * delta * n * k / (n + k)
            mean += delta * k / (n + k)
            n += k
    stats = TensorStats(values.name, dtype_name(values.elem_type), list(values.shape), count,
                        low if n else None, high if n else None, mean if n else None,
                        float(np.sqrt(m2 / n)) if n else None, zeros, nan, posinf, neginf, source=values.source)
    if n:
        stats.histogram, stats.edges = _histogram(values, bins, (low, high), cancel, chunk_bytes)
    return stats


def _histogram(values: TensorValues, bins: int, span: tuple[float, float], cancel: CancelToken | None,
               chunk_bytes: int) -> tuple[list[int], list[float]]:
    counts = np.zeros(bins, np.int64)
    edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=span)
    for chunk in values.chunks(chunk_bytes):
        if cancel is not None:
            cancel.check()
        x = as_numbers(chunk, values.elem_type)
        counts += np.histogram(x[np.isfinite(x)], bins=edges)[0]
    return counts.tolist(), edges.tolist()


def tensor_page(values: TensorValues, start: int = 0, count: int = 64) -> np.ndarray:
    """`count` flat values from `start` (fewer at the end), as numbers (bfloat16 widened)."""
    start = max(0, min(start, values.count))
    parts = [as_numbers(c, values.elem_type) if values.elem_type == BFLOAT16 else c.copy()
             for c in values.chunks(CHUNK_BYTES, start, start + count)]
    return np.concatenate(parts) if parts else np.empty(0)

