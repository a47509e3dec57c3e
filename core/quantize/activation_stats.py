"""The statistics of the activations the weight-only candidates read, from calibration feeds.

Why: a weight's rounding error matters as much as the inputs it multiplies: importance-weighted
scales (blockwise.refine) need each input channel's mean square x_k^2, GPTQ-style compensation
(gptq.py) the whole second moment X^T X of the layer's input.

Contract: `activation_stats(model, feeds, nodes, workdir, report, full)` runs the float model once
per batch of `feeds` with the inputs of `nodes` (node name -> its input tensor, main graph)
exposed and returns node -> mean x_k^2 ([K] float32; `full`: X^T X / rows, [K, K] float64), every
row of every batch counted (padding too: the model computes those positions, and its outputs
there are compared). Nodes reading one tensor share one result. Memory: one batch's exposed
activations and the results.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, session
from onnxport.core.util.progress import Reporter


def activation_stats(model: onnx.ModelProto, feeds: FeedSource, nodes: dict[str, str], workdir: Path,
                     report: Reporter, full: bool = False) -> dict[str, np.ndarray]:
    """See the module docstring; `model` is loaded with its weights and is not changed."""
    tensors = list(dict.fromkeys(nodes.values()))
    if not tensors:
        return {}
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
            x = np.asarray(value, np.float32).reshape(-1, value.shape[-1])
            part = x.T.astype(np.float64) @ x if full else np.einsum("rk,rk->k", x, x, dtype=np.float64)
            sums[name] = sums.get(name, 0.0) + part
            rows[name] = rows.get(name, 0) + x.shape[0]
    return {node: (sums[t] / max(rows[t], 1)) if full else (sums[t] / max(rows[t], 1)).astype(np.float32)
            for node, t in nodes.items() if t in sums}
