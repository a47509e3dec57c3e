"""Memory-mapped tensors: the zero-copy views every parameter reader hands out.

A reader maps its file once (`map_file`) and gives each tensor a loader (`view_loader`) that
returns a read-only numpy view at the tensor's offset, checking first that the file has not
shrunk since it was mapped (touching a mapping past the end of a file kills the process with
SIGBUS). `storage_dtype` says how an ONNX element type's raw little-endian bytes are viewed.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.errors import CorruptFileError, NominalCheckpointError, cannot_read

STRING = onnx.TensorProto.STRING

# ONNX element type -> the numpy dtype its raw little-endian bytes are read as. bfloat16 and the
# float8 types come back as same-width unsigned ints (numpy has no such types).
_STORAGE = {
    1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2", 11: "<f8",
    12: "<u4", 13: "<u8", 14: "<c8", 15: "<c16", 16: "<u2", 17: "u1", 18: "u1", 19: "u1", 20: "u1",
}
_DTYPES = {code: np.dtype(name) for code, name in _STORAGE.items()} | {STRING: np.dtype(object)}
PACKED_4BIT = {21: "uint4", 22: "int4", 23: "float4e2m1"}


def storage_dtype(elem_type: int) -> np.dtype | None:
    """numpy dtype of an ONNX element type's raw bytes; object for strings, None if unknown."""
    return _DTYPES.get(elem_type)


def map_file(path: Path) -> mmap.mmap:
    """Memory-map a whole file read-only; OnnxportError naming it if it cannot be."""
    regular_file(path)
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) == 0:
                raise CorruptFileError(f"{path}: empty file")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise cannot_read(path, exc) from None


def view_loader(mm: mmap.mmap, label: str, dtype: np.dtype, offset: int, count: int,
                shape: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """A loader returning a read-only view of `count` items at `offset` of a mapped file.

    Touching a mapping past the end of a file that shrank since it was mapped kills the process
    (SIGBUS); the loader checks the file's current size first and raises instead.
    """
    mapped = len(mm)

    def load() -> np.ndarray:
        try:
            size = mm.size()
        except (OSError, ValueError):
            size = -1
        if size < mapped:
            raise CorruptFileError(f"{label}: the file changed on disk since it was opened; open it again")
        if count == 0:
            return np.zeros(shape, dtype=dtype)
        return np.frombuffer(mm, dtype=dtype, count=count, offset=offset).reshape(shape)

    return load


def nominal_loader(label: str, name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        raise NominalCheckpointError(f"{label}: '{name}' comes from a nominal checkpoint, which holds no values")
    return load
