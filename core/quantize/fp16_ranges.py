"""Which nodes compute values float16 cannot hold: measured on the float32 model, before converting.

Why: float16 tops out at 65504. A tensor that goes past it in float32 (a sum of squares, a
BatchNormalization input of 7e3 that a 1x1 Conv scales up, an attention mask of -3.4e38) becomes
inf in float16 and everything after it NaN. Keeping the node that produces such a tensor and the
nodes that read it in float32 costs two Casts and keeps the model right.

Contract: `beyond_float16(model, feeds, limit=...)` runs `model` (float32, weights loaded) in ONNX
Runtime on up to `max_feeds` feeds with every main-graph node output exposed, and returns
`{node label: reason}` for the producers and readers of each tensor (graph inputs included) whose
largest finite magnitude passes `limit` (default: float16's max / HEADROOM, so inputs a bit
larger than the validation ones still fit). Memory: the intermediate tensors of one feed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

from onnxport.core.evaluate.runtime import adapt_feed, session
from onnxport.core.graph.uses import has_bodies, subgraph_captures
from onnxport.core.quantize.fp16 import FP16_MAX, node_label

HEADROOM = 4.0
MAX_FEEDS = 4


def _exposed(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    names = [o for n in copy.graph.node if n.op_type != "Constant" for o in n.output if o]
    for name in names:
        if name not in have:
            copy.graph.output.append(onnx.ValueInfoProto(name=name))  # ORT infers the type
    return copy, [o.name for o in copy.graph.output]


def tensor_peaks(model: onnx.ModelProto, feeds: Iterable[dict], max_feeds: int = MAX_FEEDS,
                 workdir=None) -> dict[str, float]:
    """Largest finite |value| of every float tensor (graph inputs and node outputs) over the feeds."""
    exposed, names = _exposed(model)
    sess = session(exposed, label=f"{model.graph.name or 'model'} (all tensors exposed)", workdir=workdir)
    del exposed
    peaks: dict[str, float] = {}
    for count, feed in enumerate(feeds):
        if count >= max_feeds:
            break
        feed = adapt_feed(feed, sess)
        for name, value in list(feed.items()) + list(zip(names, sess.run(names, feed))):
            value = np.asarray(value)
            if value.dtype.kind != "f" or not value.size:
                continue
            peak = float(np.abs(value).max())  # one pass; the masked copy only when something is inf/NaN
            if not np.isfinite(peak):
                finite = np.abs(value[np.isfinite(value)])
                if not finite.size:
                    continue
                peak = float(finite.max())
            peaks[name] = max(peaks.get(name, 0.0), peak)
    return peaks


def beyond_float16(model: onnx.ModelProto, feeds: Iterable[dict], *, limit: float = FP16_MAX / HEADROOM,
                   max_feeds: int = MAX_FEEDS, workdir=None) -> dict[str, str]:
    """See the module docstring."""
    peaks = tensor_peaks(model, feeds, max_feeds, workdir)
    over = {name: peak for name, peak in peaks.items() if peak > limit}
    if not over:
        return {}
    kept: dict[str, str] = {}
    for i, node in enumerate(model.graph.node):
        reads = list(node.input) + (sorted(subgraph_captures(node)) if has_bodies(node) else [])
        for name in list(node.output) + reads:
            if name in over:
                kept.setdefault(node_label(node, i), f"'{name}' reaches {over[name]:.3g} in float32 "
                                                     f"(float16 max 65504)")
    return kept
