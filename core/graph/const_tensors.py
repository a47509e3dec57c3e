"""Constant tensors as the writer sees them: lazy, and copyable file-to-file when possible.

A `ConstTensor` is one initializer of the model being written. Its bytes come from one of:
- `span`: raw little-endian bytes in a file (a checkpoint, external data) -> copied by the kernel
  (copy_file_range), never entering Python memory;
- `proto`: an inline initializer of the source model -> serialized as it is;
- `compute()`: values computed on demand (a folded Transpose of a weight), one tensor at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.io.external_data import external_reference
from onnxport.core.io.model_io import tensor_nbytes
from onnxport.core.io.parameter_set import FileSpan, ParamTensor, np_dtype_for
from onnxport.core.util.errors import CorruptFileError


@dataclass
class ConstTensor:
    name: str
    elem_type: int
    shape: tuple[int, ...] | None  # None: known only once computed
    nbytes: int  # exact, or an estimate when shape is None
    span: FileSpan | None = None
    proto: onnx.TensorProto | None = None
    compute: Callable[[], np.ndarray] | None = None
    doc_string: str = ""

    def values(self) -> np.ndarray:
        """The tensor's values as a fresh (or read-only) array; memory is the caller's to drop."""
        if self.compute is not None:
            return self.compute()
        if self.span is not None:
            return read_span(self.span, self.elem_type, self.shape or ())
        if self.proto is not None:
            if self.proto.data_location == onnx.TensorProto.EXTERNAL:
                raise CorruptFileError(f"tensor '{self.name}': external data not resolved against its folder")
            try:
                return numpy_helper.to_array(self.proto)
            except (ValueError, TypeError, KeyError) as exc:  # dims that do not fit the data held
                raise CorruptFileError(f"tensor '{self.name}': its data does not fit its dims ({exc})") from None
        raise CorruptFileError(f"tensor '{self.name}' has no data")


def read_span(span: FileSpan, elem_type: int, shape: tuple[int, ...]) -> np.ndarray:
    """Read a span into a private array (not a mapping: the memory goes when the array does)."""
    dtype = np_dtype_for(elem_type).newbyteorder("<")
    buf = bytearray(span.length)
    with open(span.path, "rb", buffering=0) as f:
        f.seek(span.offset)
        got = f.readinto(buf)
    if got != span.length:
        raise CorruptFileError(f"{span.path}: truncated: {span.length} bytes expected at offset {span.offset}")
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def from_param(name: str, p: ParamTensor) -> ConstTensor:
    if p.span is not None:
        return ConstTensor(name, p.elem_type, tuple(p.shape), p.nbytes, span=p.span)
    return ConstTensor(name, p.elem_type, tuple(p.shape), p.nbytes, compute=lambda: np.asarray(p.array()))


def from_initializer(t: onnx.TensorProto, model_dir: Path | None) -> ConstTensor:
    """An initializer of the source model: inline (proto) or in external data (span)."""
    shape = tuple(int(d) for d in t.dims)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        if model_dir is None:
            raise CorruptFileError(f"tensor '{t.name}': refers to external data but the model has no folder")
        ref = external_reference(t, model_dir)  # confined to the folder, offset/length checked
        return ConstTensor(t.name, t.data_type, shape, ref.length, span=FileSpan(ref.path, ref.offset, ref.length),
                           doc_string=t.doc_string)
    return ConstTensor(t.name, t.data_type, shape, tensor_nbytes(t), proto=t)


def from_array(name: str, array: np.ndarray) -> ConstTensor:
    elem_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    return ConstTensor(name, elem_type, tuple(array.shape), array.nbytes, compute=lambda: array)
