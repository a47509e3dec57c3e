"""Which weight method an int4 run uses, and the activation statistics it needs.

Why: scales chosen for the inputs a weight really multiplies beat scales chosen for the weight
alone (MiniLM, block 32: held-out min cosine 0.9772 unweighted, 0.9800 weighted by the channels'
mean square); GPTQ-style compensation needs the whole X^T X, which only real data should give.

Contract: `weight_method(name, symmetric, prepared, nodes, calibration, search, workdir, report,
whole)` -> `WeightMethod`. `name` `auto`: `gptq` with calibration data, else `hqq`. `gptq`
collects X^T X of each MatMul's input on the calibration feeds (refused without them, and refused
for a model that is not run whole, `whole` False: bounded.py, saying so); `hqq` collects the input
channels' mean square on the calibration feeds, else on the search part of the validation inputs
when they are real (never the held-out part), else none (generated inputs, or a model not run
whole); `rtn` needs nothing.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import load_full
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize.activation_stats import activation_stats
from onnxport.core.quantize.nbits_plan import MATMUL
from onnxport.core.quantize.weights import METHODS, WeightMethod
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter


def weight_method(name: str, symmetric: bool, prepared: Path, nodes: list[str], calibration: FeedSource | None,
                  search: FeedSource | None, workdir: Path, report: Reporter, whole: bool = True) -> WeightMethod:
    """See the module docstring."""
    if name not in (*METHODS, "auto"):
        raise OnnxportError(f"unknown int4 method '{name}'; choose one of auto, {', '.join(METHODS)}")
    if name == "auto":
        name = "gptq" if calibration is not None and whole else "hqq"
    method = WeightMethod(name, symmetric)
    if name == "rtn":
        return method
    if name == "gptq" and calibration is None:
        raise OnnxportError("the GPTQ-style int4 method needs calibration data (--calibration)",
                            hint="--int4-method hqq works without it")
    if name == "gptq" and not whole:
        raise OnnxportError("the GPTQ-style int4 method runs the model whole on the calibration data, and this model "
                            "is too large to run whole (it is quantized a weight at a time)",
                            hint="--int4-method hqq or rtn work without running it")
    if not whole:
        return method
    feeds = calibration if calibration is not None else search
    if feeds is None or feeds.generated:
        return method
    graph = load_graph(prepared)
    inputs = {n.name: n.input[0] for n in graph.graph.node if n.name in set(nodes) and n.op_type == MATMUL}
    stats = activation_stats(load_full(prepared), feeds, inputs, workdir, report, full=name == "gptq")
    if name == "gptq":
        method.hessians = stats
    else:
        method.importance = stats
    return method
