"""The second moments of the activations the weight-only candidates read, from calibration feeds.

Why: GPTQ-style compensation and importance-weighted scales need, per weight, the Hessian of its
layer's output error, X^T X over the calibration rows of its input X (weights.py, gptq.py).

Contract: `hessians(model, feeds, nodes, workdir, report)` runs the float model once per batch of
`feeds` with the inputs of `nodes` (MatMul name -> its input tensor, main graph) exposed, and
returns node -> X^T X / rows ([K, K] float64), every row of every batch counted (padding too: the
model computes those positions, and its outputs there are compared). Several nodes reading one
tensor share one matrix. Memory: one batch's exposed activations and the matrices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, session
from onnxport.core.util.progress import Reporter


def hessians(model: onnx.ModelProto, feeds: FeedSource, nodes: dict[str, str], workdir: Path,
             report: Reporter) -> dict[str, np.ndarray]:
    """See the module docstring; `model` is loaded with its weights and is not changed."""
    tensors = list(dict.fromkeys(nodes.values()))
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    known = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors if t not in known)
    sess = session(exposed, label="float model (calibration activations)", workdir=workdir)
    del exposed
    sums: dict[str, np.ndarray] = {}
    rows: dict[str, int] = {}
    total = max(len(feeds), 1)
    for i, feed in enumerate(feeds):
        report.check()
        report(i / total, f"collecting calibration activations (batch {i + 1}/{total})")
        for name, value in zip(tensors, sess.run(tensors, adapt_feed(feed, sess))):
            x = np.asarray(value, np.float64).reshape(-1, value.shape[-1])
            sums[name] = sums.get(name, 0.0) + x.T @ x
            rows[name] = rows.get(name, 0) + x.shape[0]
    return {node: sums[t] / max(rows[t], 1) for node, t in nodes.items() if t in sums}
