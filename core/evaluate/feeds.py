"""Model inputs ("feeds") for validation, calibration and benchmarks: from files or generated.

Contract:
- `input_specs(model)` (input_specs.py) lists the inputs a caller feeds: dtype, declared shape and
  what the graph says about their values (index ranges, masks).
- `generate_feeds(specs, count)` makes `count` deterministic feeds with the sizes of input_shapes.py
  and the values of input_values.py (first_run.fitted_feeds fits the sizes by running the model).
- `open_feeds(source, specs)` gives a lazy `FeedSource` from None (generated), a mapping or an
  iterable of mappings name -> array, a `.npz` file, or a folder of `.npy`/`.npz` files. Arrays
  are cut into batches along each input's batch axis (axis 0, or the axis its type marks as the
  batch); an array without that axis is one sample, a scalar input goes whole with every batch.
- Uncompressed `.npz` members and `.npy` files are memory-mapped, never loaded whole; every array
  is checked against its input (name, rank, fixed dims, dtype kind; cast to the input's width),
  with a one-line error.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxport.core.evaluate.input_shapes import BATCH, ShapePlan, batch_axis
from onnxport.core.evaluate.input_specs import InputSpec, input_specs
from onnxport.core.evaluate.input_values import generate as generate_values
from onnxport.core.evaluate.runtime import describe_feed
from onnxport.core.io.npz_reader import NpzMember, list_npz, read_member
from onnxport.core.util.errors import OnnxportError, no_such_file

BATCH_SIZE = BATCH
__all__ = ["FeedSource", "FeedsLike", "InputSpec", "describe_feed", "generate_feeds", "input_specs", "open_feeds"]


def generate_feeds(specs: list[InputSpec], count: int = 1, *, seed: int = 0,
                   dim_sizes: Mapping[str, int] | None = None, batch: int = BATCH_SIZE,
                   shapes: Mapping[str, tuple[int, ...]] | None = None) -> list[dict[str, np.ndarray]]:
    plan = ShapePlan(specs, dim_sizes=dim_sizes, shapes=shapes, batch=batch)
    return generate_values(specs, plan.shapes(), count, seed=seed)


class _LazyArray:
    """An array in a file: shape/dtype known up front, values read (or mapped) on demand."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, opener) -> None:
        self.shape, self.dtype, self._opener = shape, dtype, opener
        self._array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = self._opener()
        return self._array

    def take(self, axis: int, start: int, stop: int) -> np.ndarray:
        """Samples `start:stop` along `axis`, copied out of the file."""
        index = (slice(None),) * axis + (slice(start, stop),)
        return np.array(self.array()[index])

    def with_axis(self, axis: int) -> _LazyArray:
        """This one sample with its batch axis (length 1) inserted at `axis`."""
        shape = self.shape[:axis] + (1,) + self.shape[axis:]
        return _LazyArray(shape, self.dtype, lambda: np.expand_dims(self.array(), axis))


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
    """Arrays for all inputs, from one place, sharing a sample count along their batch axes."""

    label: str
    arrays: dict[str, _LazyArray]
    axes: dict[str, int | None]  # batch axis per input; None: the same array goes with every batch
    samples: int
    step: int | None = None  # a batch axis of fixed size takes exactly that many samples per run

    def batches(self, batch_size: int | None) -> Iterator[dict[str, np.ndarray]]:
        step = self._step(batch_size)
        for start in range(0, self.samples, step):
            yield {k: a.array() if self.axes[k] is None else a.take(self.axes[k], start, start + step)
                   for k, a in self.arrays.items()}

    def _step(self, batch_size: int | None) -> int:
        return max(self.step or batch_size or self.samples, 1)

    def count(self, batch_size: int | None) -> int:
        return -(-self.samples // self._step(batch_size))


def _group(label: str, arrays: dict[str, _LazyArray], specs: list[InputSpec]) -> _ArrayGroup:
    by_name = {s.name: s for s in specs}
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        has = ", ".join(sorted(arrays)) or "nothing"
        raise OnnxportError(f"{label}: no array for model input '{missing[0]}' (it has: {has})")
    members: dict[str, _LazyArray] = {}
    axes: dict[str, int | None] = {}
    samples: dict[str, int] = {}
    steps = []
    for name, spec in by_name.items():
        a = arrays[name]
        _check_dtype(label, spec, a.dtype)
        rank = None if spec.shape is None else len(spec.shape)
        axis = batch_axis(spec) if rank is not None else (0 if a.shape else None)
        if rank is not None and axis is not None and len(a.shape) == rank - 1:
            a = a.with_axis(axis)  # one sample without its batch axis
        elif rank is not None and len(a.shape) != rank:
            raise OnnxportError(f"{label}: array '{name}' has shape {list(a.shape)}, but input "
                                f"{spec.describe()} has rank {rank}")
        for ax, (want, got) in enumerate(zip(spec.shape or (), a.shape)):
            if ax != axis and isinstance(want, int) and want > 0 and want != got:
                raise OnnxportError(f"{label}: array '{name}' has shape {list(arrays[name].shape)}, but input "
                                    f"{spec.describe()} needs {want} on axis {ax}")
        if axis is not None:
            samples[name] = a.shape[axis]
            fixed = spec.shape[axis] if spec.shape else None
            if isinstance(fixed, int) and fixed > 0:
                steps.append(fixed)
        members[name], axes[name] = a, axis
    if len(set(samples.values())) > 1:
        shapes = ", ".join(f"{n}{list(arrays[n].shape)} (axis {axes[n]})" for n in samples)
        raise OnnxportError(f"{label}: arrays disagree on the number of samples along their batch axes: {shapes}")
    count = next(iter(samples.values()), 1)
    return _ArrayGroup(label, members, axes, count, min(steps) if steps else None)


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
    hint: str | None = None  # for errors: how to give other sizes (guessed shapes only)
    regenerate: Callable[[int], list[dict[str, np.ndarray]]] | None = None  # generated: n more alike

    def more(self, count: int) -> FeedSource:
        """`count` generated feeds with the same shapes and chosen values (e.g. calibration batches
        like the validation ones); the first ones are this source's."""
        if self.regenerate is None:
            raise OnnxportError(f"{self.description}: not generated")
        feeds = self.regenerate(count)
        return FeedSource(self.specs, f"{count} generated batch(es): {describe_feed(feeds[0])}", _feeds=feeds,
                          generated=True, hint=self.hint, regenerate=self.regenerate)

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
               generate: int = 2, seed: int = 0, dim_sizes: Mapping[str, int] | None = None,
               shapes: Mapping[str, tuple[int, ...]] | None = None, like: FeedSource | None = None) -> FeedSource:
    """See the module docstring. `generate`: how many feeds to make when `source` is None; `like`: a
    generated source (first_run.fitted_feeds) whose shapes and values to generate them with."""
    if isinstance(source, FeedSource):
        return source
    if source is None and like is not None and like.regenerate is not None:
        return like.more(generate)
    if source is None:
        feeds = generate_feeds(specs, generate, seed=seed, dim_sizes=dim_sizes, shapes=shapes)
        described = describe_feed(feeds[0]) if feeds else ""
        return FeedSource(specs, f"{generate} generated batch(es): {described}", _feeds=feeds, generated=True)
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
        raise no_such_file(path)
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
