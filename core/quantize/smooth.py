"""SmoothQuant-style rescaling of what dynamic int8 quantizes per tensor: an exact float rewrite.

Why: ORT quantizes a MatMul's activation with one scale per tensor, set by its largest channels
(a post-LayerNorm activation's few wide channels); its weights get one scale per output column.
Dividing channel j of x by s_j and multiplying row j of W by s_j leaves x @ W as it is and, with
s_j = max|x_j|^a / max|W[j]|^(1-a), shares the range between the two.

Contract: `smooth(model, maxima, alpha=ALPHA)` rewrites `model` in place. For each activation x
read by MatMuls with a constant 2-D float weight (main graph; not the outlier split's float parts),
s (geometric mean 1, within [1/CLIP, CLIP]) multiplies the rows of every such weight, and 1/s goes
into the constant vector Mul that makes x when only those MatMuls read it (the outlier split's
masks among them: free), else into a new Mul, added only where it serves several MatMuls or x's
widest channel passes `SPREAD` x its median one. A checked pass (passes.py); `rescaled_count`:
how many activations. `maxima[x]`: max|x_j| per channel (outlier_plan.channel_maxima).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxport.core.graph.passes import ADDED, REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.quantize.outlier_split import SUFFIX, constant_factor, weight_matmuls
from onnxport.core.quantize.passes import checked
from onnxport.core.quantize.weight_edits import (
    add_weight,
    graph_lookups,
    replace_weight,
    rescaled,
    unique_name,
)

ALPHA = 0.5  # 0.4-0.6 measured alike on all-MiniLM-L6-v2
CLIP = 100.0
SPREAD = 8.0
TAG = "/smooth"
RESCALED_BY = "activation divided by s"


def factors(x_peak: np.ndarray, w_peak: np.ndarray, alpha: float) -> np.ndarray:
    """s per channel: max|x_j|^a / max|W[j]|^(1-a), normalized to geometric mean 1, clipped; 1 where
    a channel is never seen non-zero (a masked outlier) or its weight row is zero."""
    live = (x_peak > 0) & (w_peak > 0)
    s = np.ones_like(x_peak, dtype=np.float64)
    if not live.any():
        return s.astype(np.float32)
    s[live] = x_peak[live] ** alpha / w_peak[live] ** (1.0 - alpha)
    s[live] /= np.exp(np.mean(np.log(s[live])))
    return np.clip(s, 1.0 / CLIP, CLIP).astype(np.float32)


@checked
def smooth(model: onnx.ModelProto, maxima: dict[str, np.ndarray], alpha: float = ALPHA) -> PassResult:
    """See the module docstring."""
    graph = model.graph
    weights, producer, readers, outputs = graph_lookups(graph)
    changes: list[NodeChange] = []
    for activation, nodes in weight_matmuls(graph).items():
        nodes = [n for n in nodes if not n.name.endswith(SUFFIX)]
        peak = maxima.get(activation)
        if not nodes or peak is None or peak.ndim != 1:
            continue
        rows = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]
        if any(w.shape[0] != peak.shape[0] for w in rows):
            continue
        alone = readers.get(activation, 0) == len(nodes) and activation not in outputs
        node = producer.get(activation)
        folded = constant_factor(node, weights, peak.shape[0]) if alone and node is not None else None
        seen = peak[peak > 0]
        wide = seen.size and float(seen.max()) > SPREAD * float(np.median(seen))
        if folded is None and len(nodes) < 2 and not wide:
            continue  # a Mul for one MatMul with no wide channel: not worth its time
        s = factors(peak, np.max([np.abs(w).max(axis=1) for w in rows], axis=0), alpha)
        for n, w in zip(nodes, rows):
            replace_weight(graph, weights, n, (w * s[:, None]).astype(np.float32), TAG)
            changes.append(NodeChange(n.name, REWRITTEN, "weight rows scaled by s"))
        if folded is not None:
            position, values = folded
            name = add_weight(graph, weights, unique_name(weights, f"{activation}{TAG}_factor"),
                              (values / s).astype(np.float32))
            node.input[position] = name
            rescaled(graph, activation)  # x / s now: not the float model's x
            changes.append(NodeChange(node_label(node), REWRITTEN, RESCALED_BY))
        else:
            name = add_weight(graph, weights, unique_name(weights, f"{activation}{TAG}_inverse"),
                              (1.0 / s).astype(np.float32))
            scaled = f"{activation}{TAG}"
            graph.node.append(helper.make_node("Mul", [activation, name], [scaled], name=f"{activation}{TAG}_mul"))
            changes.append(NodeChange(f"{activation}{TAG}_mul", ADDED, RESCALED_BY))
            for n in nodes:
                n.input[0] = scaled
    moved = topological_sort(graph)
    return PassResult(model, changed=bool(changes) or moved, changes=changes)


def rescaled_count(result: PassResult) -> int:
    """How many activations `smooth` rescaled."""
    return sum(c.reason == RESCALED_BY for c in result.changes)
