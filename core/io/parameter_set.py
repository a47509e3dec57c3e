"""Parameter tensors and sets: what a checkpoint (or state_dict, or .npz) holds.

A `ParamTensor` knows its name, ONNX element type, shape and where its bytes are. Its bytes stay
where they are (usually a memory-mapped file) until someone asks: `array()` returns a zero-copy
view where possible, and `file_span()` lets a writer copy the bytes file-to-file without them
ever entering Python memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnxport.core.util.errors import CheckpointMismatchError


def np_dtype_for(elem_type: int) -> np.dtype:
    """numpy dtype for an ONNX element type (bfloat16/float8 come back as same-width uints)."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        raise CheckpointMismatchError(f"unsupported ONNX element type {elem_type}") from None


def dtype_name(elem_type: int) -> str:
    """Human name of an ONNX element type: 'float32', 'int64', 'bfloat16'..."""
    if elem_type in _DTYPE_NAMES:
        return _DTYPE_NAMES[elem_type]
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type{elem_type}"


_DTYPE_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
}


def elem_type_of(name: str) -> int | None:
    """The ONNX element type `dtype_name` calls `name`; None for a name it did not give."""
    for elem_type, known in _DTYPE_NAMES.items():
        if known == name:
            return elem_type
    try:
        elem_type = onnx.TensorProto.DataType.Value(name.upper())
    except ValueError:
        return None
    return elem_type if elem_type != onnx.TensorProto.UNDEFINED and dtype_name(elem_type) == name else None


@dataclass(frozen=True)
class FileSpan:
    """Bytes `[offset, offset + length)` of `path`: lets a writer copy without loading."""

    path: Path
    offset: int
    length: int


@dataclass
class ParamTensor:
    """One named parameter (or optimizer-state tensor), loaded lazily.

    `loader` returns the values as a numpy array (a zero-copy view into a memory map where the
    format allows); `span` (if known) names the exact bytes in a file, little-endian raw data.
    """

    name: str
    elem_type: int
    shape: tuple[int, ...]
    loader: Callable[[], np.ndarray]
    source: str = ""
    trainable: bool | None = None
    span: FileSpan | None = None

    @property
    def dtype(self) -> str:
        return dtype_name(self.elem_type)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self) -> int:
        if self.elem_type == onnx.TensorProto.STRING:
            return 0
        return self.numel * np_dtype_for(self.elem_type).itemsize

    def array(self) -> np.ndarray:
        return self.loader()

    def file_span(self) -> FileSpan | None:
        return self.span


@dataclass
class OptimizerGroupState:
    """One optimizer group of a training checkpoint (Adam: momentum0/momentum1 per param)."""

    name: str
    step: int
    initial_learning_rate: float
    # param name -> {"momentum0": ParamTensor, "momentum1": ParamTensor}
    states: dict[str, dict[str, ParamTensor]] = field(default_factory=dict)


@dataclass
class ParameterSet(Mapping[str, ParamTensor]):
    """Named parameters from one or more files, plus what else the source carried.

    `nominal` is True for nominal checkpoints (names only, no values): nothing can be exported
    from them. `kind` says what the source was ("ort-checkpoint", "ort-checkpoint-legacy",
    "state_dict", "safetensors", "npz", "merged").
    """

    params: dict[str, ParamTensor]
    sources: list[Path] = field(default_factory=list)
    kind: str = ""
    nominal: bool = False
    version: int | None = None
    optimizer_groups: list[OptimizerGroupState] = field(default_factory=list)
    properties: dict[str, int | float | str] = field(default_factory=dict)
    keepalive: list[object] = field(default_factory=list)  # mmaps/files the loaders use

    def __getitem__(self, name: str) -> ParamTensor:
        return self.params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.params.values())

    @property
    def trainable(self) -> list[str]:
        return [n for n, p in self.params.items() if p.trainable]

    @property
    def frozen(self) -> list[str]:
        return [n for n, p in self.params.items() if p.trainable is False]


def merge_parameter_sets(sets: list[ParameterSet]) -> ParameterSet:
    """Merge several sets (e.g. pipeline stages holding disjoint parameters).

    A name present twice must have equal shape, type and values, else `CheckpointMismatchError`
    naming the tensor and both files. Optimizer state and properties are kept from every set.
    """
    if len(sets) == 1:
        return sets[0]
    merged: dict[str, ParamTensor] = {}
    for pset in sets:
        for name, tensor in pset.params.items():
            prior = merged.get(name)
            if prior is None:
                merged[name] = tensor
                continue
            if prior.elem_type != tensor.elem_type or tuple(prior.shape) != tuple(tensor.shape):
                raise CheckpointMismatchError(
                    f"parameter '{name}' is in both {prior.source} ({prior.dtype}{list(prior.shape)}) "
                    f"and {tensor.source} ({tensor.dtype}{list(tensor.shape)}) with different types/shapes"
                )
            if not np.array_equal(prior.array(), tensor.array()):
                raise CheckpointMismatchError(
                    f"parameter '{name}' is in both {prior.source} and {tensor.source} with different values"
                )
    result = ParameterSet(
        params=merged,
        sources=[p for s in sets for p in s.sources],
        kind="merged",
        nominal=any(s.nominal for s in sets),
        version=sets[0].version,
        optimizer_groups=[g for s in sets for g in s.optimizer_groups],
        properties={k: v for s in sets for k, v in s.properties.items()},
        keepalive=[k for s in sets for k in s.keepalive],
    )
    return result


def c_contiguous(array: np.ndarray) -> np.ndarray:
    """`array` in C order, copying only if needed; unlike np.ascontiguousarray keeps 0-d arrays 0-d."""
    array = np.asarray(array)
    return array if array.flags.c_contiguous else np.array(array, order="C")
