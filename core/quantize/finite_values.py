"""Weights and calibration values an int8/int4 scale can be made for: checked before ORT's quantizer.

Why: ONNX Runtime's quantizer computes a scale from a tensor's min and max; NaN or Inf there end in
`AssertionError: scale issue` (or a float64 scale ValueError), and a weight with no values in
`ValueError: zero-size array to reduction operation` - tracebacks, not reasons.
Contract:
- `check_weights(model, folder, op_types, excluded, label)`: every float initializer that a node of
  `op_types` (not in `excluded`) reads, in every graph, holds values and only finite ones; else one
  `OnnxportError` naming the weight and the node, and the way out (`--exclude NODE`).
- `check_feed(feed, label)`: a calibration batch's float arrays are finite, else one line naming
  the input; `check_ranges(ranges)`: every calibrated range is finite, else one line naming the tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.quantize.gain import all_graphs
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import shown

_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def _weights(model: onnx.ModelProto, op_types: set[str], excluded: set[str]):
    """(initializer, node) for each float initializer a node of `op_types` reads (first reader)."""
    initializers = {t.name: t for g in all_graphs(model) for t in g.initializer if t.data_type in _FLOATS}
    seen: set[str] = set()
    for graph in all_graphs(model):
        for node in graph.node:
            if node.op_type not in op_types or node.name in excluded:
                continue
            for name in node.input:
                if name in initializers and name not in seen:
                    seen.add(name)
                    yield initializers[name], node


def check_weights(model: onnx.ModelProto, folder: Path, op_types: Iterable[str], excluded: Iterable[str],
                  label: str) -> None:
    """See the module docstring."""
    for tensor, node in _weights(model, set(op_types), set(excluded)):
        values = numpy_helper.to_array(tensor, str(folder))
        why = "holds no values" if values.size == 0 else (
            "holds NaN or Inf" if not np.isfinite(values.astype(np.float32, copy=False)).all() else None)
        if why is not None:
            reader = f"{node.op_type} node '{shown(node.name)}'" if node.name else f"an unnamed {node.op_type} node"
            raise OnnxportError(f"{label}: weight '{shown(tensor.name)}' {list(values.shape)} of {reader} {why}: no "
                                "quantization scale fits it", hint="fix the weight" + (
                                    f", or keep the node in float (--exclude {shown(node.name)})" if node.name else ""))


def check_feed(feed: Mapping[str, np.ndarray], label: str) -> None:
    """See the module docstring."""
    for name, value in feed.items():
        value = np.asarray(value)
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise OnnxportError(f"{label}: calibration input '{shown(name)}' holds NaN or Inf: no quantization "
                                "range can be taken from it; give finite calibration data")


def check_ranges(ranges) -> None:
    """See the module docstring (`ranges`: ORT's TensorsData, tensor name -> TensorData)."""
    for name, data in ranges.items():
        low, high = data.range_value
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise OnnxportError(f"tensor '{shown(name)}' takes values from {np.min(low)} to {np.max(high)} on the "
                                "calibration data: no int8 scale fits NaN or Inf",
                                hint="give calibration data on which the model computes finite values")
