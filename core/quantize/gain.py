"""Did quantizing gain anything? A result that is neither smaller nor faster is a failure, said so.

Why: without this check a dynamic quantization of a Conv-only model (nothing it can quantize in
ONNX Runtime's CPU provider) returned the model unchanged, and a model whose tiny weights were
quantized "passed" at 1.40x the size: both reported success.

Contract:
- `quantized_nothing(source, result)`: True when `result` has no weight the quantizer converted
  (no integer or float16 weight beyond those `source` had, no quantized op); every graph counts:
  the main graph and the If/Loop/Scan bodies at any depth (their initializers and Constant nodes:
  a recurrent model's weights often live only there). `nothing_quantized(...)` is the one-line
  error saying why (which op types were there, how many inside bodies, and what would quantize them).
- `nothing_gained(size_ratio, latency_ratio)`: the verdict, None when something was gained, else
  the reason. A model at most `SMALLER` (0.9x) the size gains (the bytes are the point); one
  barely smaller or larger gains only when measured faster by `FASTER` (`latency_ratio` None: not
  measured, not faster). The reason says which: "not smaller" or "barely smaller", and the speed.
- `static_reach(name, source)`: static QDQ (ONNX Runtime's QDQ quantizer sees the main graph
  only) raises the one-line error when every weight op is inside a body, else a note of how
  many stay float, or None.
- `heavy_ops(model)`: (op type counts in the main graph, op type counts inside bodies) of the op
  types that hold a model's weights (`HEAVY_OPS`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import onnx

from onnxport.core.evaluate.runtime import QUANTIZED_OPS
from onnxport.core.graph.uses import walk_bodies
from onnxport.core.util.errors import OnnxportError

FASTER = 0.95  # latency ratio below which a model that is not smaller still counts as a gain
SMALLER = 0.9  # size ratio at or below which a model counts as smaller (0.98x is not worth a lossy model)
HEAVY_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm", "Gather", "LSTM", "GRU", "RNN", "Attention")
_INTEGER = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
            onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
_HALF = {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def all_graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    """The main graph, then every If/Loop/Scan body at any depth."""
    yield model.graph
    for _, _, _, body in walk_bodies(model.graph):
        yield body


def _low_precision(model: onnx.ModelProto) -> int:
    """Low-precision weights: initializers, and Constant nodes (Paddle-style exports keep weights there)."""
    count = 0
    for graph in all_graphs(model):
        consts = [a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
        count += sum(1 for t in list(graph.initializer) + consts if t.data_type in _INTEGER | _HALF)
    return count


def _op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for g in all_graphs(model) for n in g.node}


def quantized_nothing(source: onnx.ModelProto, result: onnx.ModelProto) -> bool:
    ops = _op_types(result) - _op_types(source)
    return not (ops & QUANTIZED_OPS) and _low_precision(result) <= _low_precision(source)


def _heavy(graph: onnx.GraphProto) -> Counter:
    """Op types holding weights; a Gather only when it reads a table held in this graph (an embedding),
    not the Gathers of shape arithmetic."""
    weights = {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return Counter(n.op_type for n in graph.node if n.op_type in HEAVY_OPS
                   and (n.op_type != "Gather" or (n.input and n.input[0] in weights)))


def heavy_ops(model: onnx.ModelProto) -> tuple[Counter, Counter]:
    graphs = iter(all_graphs(model))
    top = _heavy(next(graphs))
    inside: Counter = Counter()
    for graph in graphs:
        inside += _heavy(graph)
    return top, inside


def describe_ops(counts: Counter) -> str:
    return ", ".join(f"{c} {op}" for op, c in counts.most_common())


def nothing_quantized(name: str, mode: str, source: onnx.ModelProto, op_types: list[str]) -> OnnxportError:
    top, inside = heavy_ops(source)
    parts = [describe_ops(top)] if top else []
    if inside:
        parts.append(describe_ops(inside) + " inside If/Loop/Scan bodies")
    what = f" (it has {'; '.join(parts)})" if parts else ""
    hint = None
    if mode == "dynamic":
        hint = ("dynamic int8 quantizes only " + ", ".join(op_types) + "; ONNX Runtime's CPU provider has no int8 "
                "ConvInteger, so Conv layers need --mode static")
    elif mode == "int4":
        hint = "int4 quantizes only large MatMul weights (2-D, 16384+ values); --mode dynamic or fp16 for the rest"
    return OnnxportError(f"{name}: {mode} quantization found nothing to quantize{what}; the model would be "
                         f"unchanged: no {mode} model written", hint=hint)


def static_reach(name: str, source: onnx.ModelProto) -> str | None:
    """Static QDQ and If/Loop/Scan bodies: ONNX Runtime's QDQ quantizer rewrites the main graph only.
    Raises when every weight-holding op is inside a body (nothing it could quantize); returns a note
    saying how many stay float when only some are; None when no body holds any."""
    top, inside = heavy_ops(source)
    if not inside:
        return None
    if not top:
        raise OnnxportError(f"{name}: static QDQ quantization cannot quantize inside If/Loop/Scan bodies, and "
                            f"all of this model's weight ops are there ({describe_ops(inside)}); no static model "
                            "written", hint="--mode dynamic (MatMul, LSTM, Gather) or --mode fp16 reach into bodies")
    return (f"{sum(inside.values())} op(s) inside If/Loop/Scan bodies stay float ({describe_ops(inside)}): static "
            "QDQ quantizes the main graph only (--mode dynamic or fp16 reach into bodies)")


def nothing_gained(size_ratio: float, latency_ratio: float | None) -> str | None:
    """See the module docstring."""
    if size_ratio <= SMALLER:
        return None
    if latency_ratio is not None and latency_ratio < FASTER:
        return None
    speed = "not measured faster" if latency_ratio is None else f"not faster (latency {latency_ratio:.2f}x)"
    size = "not smaller" if size_ratio >= 0.995 else f"barely smaller (over {SMALLER:.1f}x)"
    return f"{size_ratio:.2f}x the size, {size}, and {speed}"
