"""Did quantizing gain anything? A result neither smaller nor faster is a failure, said so (else
a quantization that changed nothing, or grew the model, reported success).

Contract:
- `quantized_nothing(source, result)`: True when `result` holds no weight or op the quantizer
  converted, in any graph (If/Loop/Scan bodies included); `nothing_quantized(...)` is the one-line
  error saying why (op types there, how many inside bodies, what would quantize them).
- `nothing_gained(size_ratio, latency_ratio, latency_high)`: None when something was gained, else
  the reason. At most `SMALLER` (0.9x) the size gains; barely smaller or larger gains only when
  measured faster by `FASTER` (`latency_ratio` None: not faster), the slow end of the ratio's
  interval (`latency_high`) included: a median faster within the noise is no gain.
- `static_reach(name, source)`: static QDQ sees the main graph only: the one-line error when every
  weight op is inside a body, else a note of how many stay float, or None.
- `heavy_ops(model)`: counts of the weight-holding op types (`HEAVY_OPS`), in the main graph and
  inside bodies."""

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


def nothing_gained(size_ratio: float, latency_ratio: float | None, latency_high: float | None = None) -> str | None:
    """See the module docstring."""
    if size_ratio <= SMALLER:
        return None
    slowest = latency_ratio if latency_high is None else latency_high
    if slowest is not None and slowest < FASTER:
        return None
    if latency_ratio is None:
        speed = "not measured faster"
    elif latency_ratio < FASTER:
        speed = f"not measurably faster (latency {latency_ratio:.2f}x, within noise up to {slowest:.2f}x)"
    else:
        speed = f"not faster (latency {latency_ratio:.2f}x)"
    size = "not smaller" if size_ratio >= 0.995 else f"barely smaller (over {SMALLER:.1f}x)"
    return f"{size_ratio:.2f}x the size, {size}, and {speed}"
