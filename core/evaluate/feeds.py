"""Model inputs ("feeds") for validation, calibration and benchmarks: from files or generated.

Contract:
- `input_specs(model)` lists the inputs a caller feeds (graph inputs that are not initializers)
  with dtype and shape; an integer input used as indices (`Gather` of an embedding table, possibly
  through Cast/Unsqueeze/Reshape...) gets the valid range `[0, rows)`; an integer input whose name
  says mask gets ones.
- `generate_feeds(specs, count)` makes `count` deterministic feeds: symbolic dims get sensible
  sizes (batch-like 2, other dynamic dims 16, or `dim_sizes` by name; the same name always the
  same size), floats are standard normal, index-like ints are in range, masks are ones.
- `open_feeds(source, specs)` gives a lazy `FeedSource` from: None (generated), a mapping
  name -> array, an iterable of mappings, a `.npz` file (keys = input names), or a folder of
  `<input name>.npy` files, of `.npz` files (one feed each), or of `.npy` files (single-input
  models, one feed each). Arrays share a leading sample axis and are cut into batches of
  `batch_size` samples; uncompressed `.npz` members and `.npy` files are memory-mapped, so a
  large calibration set is never loaded whole. Every array is checked against its input (name,
  rank, fixed dims, dtype kind; ints/floats are cast to the input's width) with a one-line error.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnxport.core.io.npz_reader import NpzMember, list_npz, read_member
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.shapes import Dim, value_info_shape

BATCH_SIZE = 2
DYNAMIC_SIZE = 16
_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Identity", "Flatten", "Expand", "Clip"}
_SEQUENCE_WORDS = ("seq", "len", "token", "time", "step")


@dataclass(frozen=True)
class InputSpec:
    name: str
    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown
    int_range: tuple[int, int] | None = None  # [low, high) for index-like integer inputs
    mask: bool = False

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(helper.tensor_dtype_to_np_dtype(self.elem_type))

    def describe(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    static_shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info):
        dims = value_info_shape(vi)
        if dims is not None and all(isinstance(d, int) for d in dims):
            static_shapes.setdefault(vi.name, dims)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    specs = []
    for vi in graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        elem = vi.type.tensor_type.elem_type
        int_range, mask = None, False
        if _is_int(elem):
            mask = "mask" in vi.name.lower()
            int_range = None if mask else _index_range(vi.name, consumers, static_shapes)
        specs.append(InputSpec(vi.name, elem, value_info_shape(vi), int_range, mask))
    return specs


def _is_int(elem: int) -> bool:
    return elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16,
                    onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                    onnx.TensorProto.UINT32, onnx.TensorProto.UINT64)


def _index_range(name: str, consumers, static_shapes, depth: int = 0) -> tuple[int, int] | None:
    """[0, rows) when `name` ends up as the indices of a Gather over a table of known size."""
    bounds = []
    for node, slot in consumers.get(name, []):
        if node.op_type == "Gather" and slot == 1:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = static_shapes.get(node.input[0])
            if shape and -len(shape) <= axis < len(shape) and shape[axis] > 0:
                bounds.append(int(shape[axis]))
        elif node.op_type in _PASS_THROUGH and slot == 0 and depth < 6:
            for out in node.output:
                found = _index_range(out, consumers, static_shapes, depth + 1)
                if found:
                    bounds.append(found[1])
    return (0, min(bounds)) if bounds else None


def dim_sizes_for(specs: list[InputSpec], dim_sizes: Mapping[str, int] | None = None,
                  batch: int = BATCH_SIZE, dynamic: int = DYNAMIC_SIZE) -> dict[str, int]:
    """A size for every symbolic dim name of `specs` (overrides from `dim_sizes`)."""
    sizes: dict[str, int] = dict(dim_sizes or {})
    for spec in specs:
        for axis, d in enumerate(spec.shape or ()):
            if isinstance(d, str) and d not in sizes:
                low = d.lower()
                batch_like = "batch" in low or (axis == 0 and not any(w in low for w in _SEQUENCE_WORDS))
                sizes[d] = batch if batch_like else dynamic
    return sizes


def _concrete_shape(spec: InputSpec, sizes: Mapping[str, int], batch: int, dynamic: int) -> tuple[int, ...]:
    if spec.shape is None:
        raise OnnxportError(f"input '{spec.name}' has no declared shape; provide inputs from a file (--inputs)")
    out = []
    for axis, d in enumerate(spec.shape):
        if isinstance(d, int) and d > 0:
            out.append(d)
        elif isinstance(d, str):
            out.append(int(sizes[d]))
        else:
            out.append(batch if axis == 0 else dynamic)
    return tuple(out)


def generate_feeds(specs: list[InputSpec], count: int = 1, *, seed: int = 0,
                   dim_sizes: Mapping[str, int] | None = None, batch: int = BATCH_SIZE,
                   dynamic: int = DYNAMIC_SIZE) -> list[dict[str, np.ndarray]]:
    sizes = dim_sizes_for(specs, dim_sizes, batch, dynamic)
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(count):
        feed = {}
        for spec in specs:
            shape = _concrete_shape(spec, sizes, batch, dynamic)
            dtype = spec.dtype
            if dtype == np.bool_:
                value = rng.random(shape) < 0.5
            elif dtype.kind in "iu":
                if spec.mask:
                    value = np.ones(shape, dtype)
                else:
                    low, high = spec.int_range or (0, 2)
                    value = rng.integers(low, max(high, low + 1), shape).astype(dtype)
            elif dtype.kind == "f":
                value = rng.standard_normal(shape).astype(dtype)
            else:
                raise OnnxportError(f"cannot generate values for input '{spec.name}' of type {dtype}; "
                                    "provide inputs from a file")
            feed[spec.name] = value
        feeds.append(feed)
    return feeds


# --- files ---------------------------------------------------------------------------------------

class _LazyArray:
    """An array in a file: shape/dtype known up front, values read (or mapped) on demand."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, opener) -> None:
        self.shape, self.dtype, self._opener = shape, dtype, opener
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = self._opener()
        return self._array

    def rows(self, start: int, stop: int) -> np.ndarray:
        return np.array(self.array()[start:stop])


def _npy_file(path: Path) -> _LazyArray:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise OnnxportError(f"{path}: not a readable .npy array ({exc})") from None
    return _LazyArray(tuple(arr.shape), arr.dtype, lambda: arr)


def _npz_members(path: Path) -> dict[str, _LazyArray]:
    """Members of an .npz (read by `npz_reader`, bounded by the file); stored ones are memory-mapped."""
    return {m.name: _LazyArray(m.shape, m.dtype, _member_opener(path, m)) for m in list_npz(path)}


def _member_opener(path: Path, m: NpzMember):
    if m.data_offset is not None and m.nbytes:
        return lambda: np.memmap(path, m.dtype, "r", m.data_offset, m.shape, "F" if m.fortran else "C")
    return lambda: read_member(path, m)


@dataclass
class _ArrayGroup:
    """Arrays for all inputs sharing a leading sample axis, from one place."""

    label: str
    arrays: dict[str, _LazyArray]
    samples: int
    batched: bool  # False: one sample without the batch axis

    def batches(self, batch_size: int | None) -> Iterator[dict[str, np.ndarray]]:
        if not self.batched:
            yield {k: a.array()[None, ...].copy() for k, a in self.arrays.items()}
            return
        step = self.samples if not batch_size else batch_size
        for start in range(0, self.samples, max(step, 1)):
            yield {k: a.rows(start, start + step) for k, a in self.arrays.items()}

    def count(self, batch_size: int | None) -> int:
        if not self.batched or not batch_size:
            return 1
        return -(-self.samples // batch_size)


def _group(label: str, arrays: dict[str, _LazyArray], specs: list[InputSpec]) -> _ArrayGroup:
    by_name = {s.name: s for s in specs}
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        has = ", ".join(sorted(arrays)) or "nothing"
        raise OnnxportError(f"{label}: no array for model input '{missing[0]}' (it has: {has})")
    batched_flags, samples = set(), set()
    for name in by_name:
        a, spec = arrays[name], by_name[name]
        _check_dtype(label, spec, a.dtype)
        rank = None if spec.shape is None else len(spec.shape)
        if rank is not None and len(a.shape) == rank - 1 and rank > 0:
            batched_flags.add(False)
            dims = (1,) + a.shape
        elif rank is None or len(a.shape) == rank:
            batched_flags.add(True)
            dims = a.shape
            if dims:
                samples.add(dims[0])
        else:
            raise OnnxportError(f"{label}: array '{name}' has shape {list(a.shape)}, but input "
                                f"{spec.describe()} has rank {rank}")
        for axis, (want, got) in enumerate(zip(spec.shape or (), dims)):
            if axis > 0 and isinstance(want, int) and want > 0 and want != got:
                raise OnnxportError(f"{label}: array '{name}' has shape {list(a.shape)}, but input "
                                    f"{spec.describe()} needs {want} on axis {axis}")
    if len(batched_flags) > 1 or len(samples) > 1:
        shapes = ", ".join(f"{n}{list(arrays[n].shape)}" for n in by_name)
        raise OnnxportError(f"{label}: arrays disagree on the number of samples (axis 0): {shapes}")
    return _ArrayGroup(label, {n: arrays[n] for n in by_name}, samples.pop() if samples else 1,
                       batched_flags != {False})


def _check_dtype(label: str, spec: InputSpec, dtype: np.dtype) -> None:
    want = spec.dtype
    ok = (want.kind == dtype.kind) or (want.kind in "iu" and dtype.kind in "iu") or (
        want.kind == "b" and dtype.kind in "iub")
    if not ok:
        raise OnnxportError(f"{label}: array '{spec.name}' is {dtype}, input {spec.describe()} needs {want}")


@dataclass
class FeedSource:
    """A lazy, re-iterable sequence of feeds (dict input name -> array), cast to the inputs' dtypes."""

    specs: list[InputSpec]
    description: str
    _groups: list[_ArrayGroup] = field(default_factory=list)
    _feeds: list[dict[str, np.ndarray]] | None = None
    batch_size: int | None = None
    generated: bool = False

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        dtypes = {s.name: s.dtype for s in self.specs}
        if self._feeds is not None:
            for feed in self._feeds:
                yield {k: _cast(v, dtypes[k]) for k, v in feed.items() if k in dtypes}
            return
        for group in self._groups:
            for feed in group.batches(self.batch_size):
                yield {k: _cast(v, dtypes[k]) for k, v in feed.items()}

    def __len__(self) -> int:
        if self._feeds is not None:
            return len(self._feeds)
        return sum(g.count(self.batch_size) for g in self._groups)

    def first(self) -> dict[str, np.ndarray]:
        for feed in self:
            return feed
        raise OnnxportError(f"{self.description}: no inputs")


def _cast(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


FeedsLike = None | str | Path | Mapping[str, np.ndarray] | Iterable[Mapping[str, np.ndarray]] | FeedSource


def open_feeds(source: FeedsLike, specs: list[InputSpec], *, batch_size: int | None = None,
               generate: int = 2, seed: int = 0, dim_sizes: Mapping[str, int] | None = None) -> FeedSource:
    """See the module docstring. `generate`: how many feeds to make when `source` is None."""
    if isinstance(source, FeedSource):
        return source
    if source is None:
        feeds = generate_feeds(specs, generate, seed=seed, dim_sizes=dim_sizes)
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feeds[0].items()) if feeds else ""
        return FeedSource(specs, f"{generate} generated batch(es): {shapes}", _feeds=feeds, generated=True)
    if isinstance(source, (str, Path)):
        return _open_path(Path(source), specs, batch_size)
    if isinstance(source, Mapping):
        source = [source]
    groups = []
    for i, feed in enumerate(source):
        arrays = {k: _LazyArray(np.shape(v), np.asarray(v).dtype, lambda v=v: np.asarray(v)) for k, v in feed.items()}
        groups.append(_group(f"inputs[{i}]", arrays, specs))
    return FeedSource(specs, f"{len(groups)} given batch(es)", _groups=groups)


def _open_path(path: Path, specs: list[InputSpec], batch_size: int | None) -> FeedSource:
    if not path.exists():
        raise OnnxportError(f"{path}: no such file or folder")
    if path.is_file():
        if path.suffix.lower() == ".npy" and len(specs) == 1:
            groups = [_group(str(path), {specs[0].name: _npy_file(path)}, specs)]
        elif zipfile.is_zipfile(path):
            groups = [_group(str(path), _npz_members(path), specs)]
        else:
            raise OnnxportError(f"{path}: expected an .npz file (arrays named like the model's inputs), "
                                "an .npy file (single-input models) or a folder of them")
        return FeedSource(specs, path.name, _groups=groups, batch_size=batch_size)
    names = {s.name for s in specs}
    npy = sorted(path.glob("*.npy"))
    per_input = {p.stem: p for p in npy if p.stem in names}
    if per_input:
        arrays = {n: _npy_file(p) for n, p in per_input.items()}
        groups = [_group(str(path), arrays, specs)]
    elif (npz := sorted(path.glob("*.npz"))):
        groups = [_group(str(p), _npz_members(p), specs) for p in npz]
    elif npy and len(specs) == 1:
        groups = [_group(str(p), {specs[0].name: _npy_file(p)}, specs) for p in npy]
    else:
        wanted = ", ".join(f"{n}.npy" for n in sorted(names))
        raise OnnxportError(f"{path}: no inputs found: expected {wanted}, or .npz files, in this folder")
    return FeedSource(specs, f"{path.name}/ ({len(groups)} file(s))", _groups=groups, batch_size=batch_size)
