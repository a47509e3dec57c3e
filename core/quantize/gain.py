"""Did quantizing gain anything? A result that is neither smaller nor faster is a failure, said so.

Why: without this check a dynamic quantization of a Conv-only model (nothing it can quantize in
ONNX Runtime's CPU provider) returned the model unchanged, and a model whose tiny weights were
quantized "passed" at 1.40x the size: both reported success.

Contract:
- `quantized_nothing(source, result)`: True when `result` has no weight the quantizer converted
  (no integer initializer beyond those `source` had, no quantized op); `nothing_quantized(...)`
  is the one-line error saying why (which op types were there and what would quantize them).
- `nothing_gained(size_ratio, latency_ratio)`: the verdict, None when something was gained, else
  the reason. A smaller model always gains (the bytes are the point); a model at least as large
  gains only when measured faster by `FASTER` (`latency_ratio` None: not measured, not faster).
"""

from __future__ import annotations

from collections import Counter

import onnx

from onnxport.core.evaluate.runtime import QUANTIZED_OPS
from onnxport.core.util.errors import OnnxportError

FASTER = 0.95  # latency ratio below which a model that is not smaller still counts as a gain
_INTEGER = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
            onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
_HALF = {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def _low_precision(model: onnx.ModelProto) -> int:
    """Low-precision weights: initializers, and Constant nodes (Paddle-style exports keep weights there)."""
    consts = [a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    return sum(1 for t in list(model.graph.initializer) + consts if t.data_type in _INTEGER | _HALF)


def quantized_nothing(source: onnx.ModelProto, result: onnx.ModelProto) -> bool:
    ops = {n.op_type for n in result.graph.node} - {n.op_type for n in source.graph.node}
    return not (ops & QUANTIZED_OPS) and _low_precision(result) <= _low_precision(source)


def nothing_quantized(name: str, mode: str, source: onnx.ModelProto, op_types: list[str]) -> OnnxportError:
    counts = Counter(n.op_type for n in source.graph.node if n.op_type not in ("Constant", "Identity"))
    heavy = [f"{c} {op}" for op, c in counts.most_common() if op in ("Conv", "ConvTranspose", "MatMul", "Gemm",
                                                                     "Gather", "LSTM", "GRU", "Attention")]
    what = f" (it has {', '.join(heavy)})" if heavy else ""
    hint = ("dynamic int8 quantizes only " + ", ".join(op_types) + "; ONNX Runtime's CPU provider has no int8 "
            "ConvInteger, so Conv layers need --mode static") if mode == "dynamic" else None
    return OnnxportError(f"{name}: {mode} quantization found nothing to quantize{what}; the model would be "
                         f"unchanged: no {mode} model written", hint=hint)


def nothing_gained(size_ratio: float, latency_ratio: float | None) -> str | None:
    """See the module docstring."""
    if size_ratio < 1.0:
        return None
    if latency_ratio is not None and latency_ratio < FASTER:
        return None
    speed = "not measured faster" if latency_ratio is None else f"not faster (latency {latency_ratio:.2f}x)"
    return f"{size_ratio:.2f}x the size and {speed}"
