"""Which int8 mode can help a model, from its op types: what the app offers first for Quantize.

Why: dynamic int8 quantizes MatMul, Gather, Attention, LSTM... but never Conv (ONNX Runtime's CPU
provider has no int8 ConvInteger kernel), so on a model whose weights all sit in Conv layers it
quantizes nothing and `quantize` refuses after trying (gain.nothing_quantized); static int8 (QDQ)
quantizes them. Contract: `int8_choice(op_types)` -> ('static', the reason dynamic cannot help)
when every weight-holding op type is one dynamic leaves in float, else ('dynamic', None).
`dynamic_refusal(name, model)`: the same choice for `quantize --mode dynamic` (the CLI, the API):
the one-line error, before any work, when it says static and no embedding table (a Gather reading a
weight, which dynamic does quantize) is there either; else None.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from onnxport.core.quantize.gain import HEAVY_OPS, all_graphs, heavy_ops
from onnxport.core.quantize.modes import NO_DYNAMIC
from onnxport.core.util.errors import OnnxportError

# a Gather holds weights only when it reads an embedding table; a Conv model's Gathers are shape arithmetic
WEIGHT_OPS = frozenset(HEAVY_OPS) - {"Gather"}


def int8_choice(op_types: Iterable[str]) -> tuple[str, str | None]:
    """See the module docstring; `op_types`: the model's node op types (repeats allowed)."""
    weights = set(op_types) & WEIGHT_OPS
    if weights and weights <= NO_DYNAMIC:
        layers = " and ".join(sorted(weights))
        return "static", (f"this model's weights are all in {layers} layers, which dynamic int8 leaves in float "
                          "(ONNX Runtime's CPU provider has no int8 ConvInteger): it would quantize nothing; "
                          "static int8 quantizes them")
    return "dynamic", None


def dynamic_refusal(name: str, model: onnx.ModelProto) -> OnnxportError | None:
    """See the module docstring (`name`: the model's file name, for the message)."""
    mode, why = int8_choice(n.op_type for g in all_graphs(model) for n in g.node)
    top, inside = heavy_ops(model)
    if mode == "dynamic" or top["Gather"] or inside["Gather"]:
        return None
    return OnnxportError(f"{name}: dynamic quantization found nothing to quantize: {why}; no dynamic model written",
                         hint="use --mode static for Conv layers", option="--mode")
