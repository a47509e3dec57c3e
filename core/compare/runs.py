"""Run one side of a comparison in ONNX Runtime, exposing a few of its tensors at a time.

Why: exposing every intermediate tensor of a run keeps them all alive at once (ONNX Runtime
allocates every graph output it is asked for); two models of a detector on one page then hold
gigabytes. So a comparison asks for a bounded batch of tensors per run and runs again for the
next batch. Contract: `Runner(side, wanted)` prepares the side once, in inference semantics
(Dropout off, BatchNormalization on its running statistics: a training-mode graph would draw
new random masks each run) and, for an eval graph, its checkpoint's parameters as feeds
(reference.py); `run(names, feed)` builds a
model computing only `names` (nodes nothing asked for are left out), runs it on the CPU
provider and returns name -> array; `sizes(feed)` estimates each tensor's bytes from shape
inference with the feed's shapes (None where unknown). The model's weights stay where they are
(external data is read by ONNX Runtime from the model's folder).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.compare.sides import ModelSide
from onnxport.core.evaluate.reference import eval_semantics, reference_model
from onnxport.core.evaluate.runtime import adapt_feed, run, session
from onnxport.core.graph.shape_infer import inferred_value_infos
from onnxport.core.graph.uses import node_uses
from onnxport.core.io.external_data import element_bits, has_external
from onnxport.core.io.model_io import strip_weights


class Runner:
    def __init__(self, side: ModelSide, wanted: list[str]) -> None:
        self.label = side.label
        self.folder = side.folder
        if side.params is not None:
            self.model, self.param_feeds = reference_model(side.path, wanted, side.params, weights=False)
        else:  # the session's graph, left as it is: each run's model is put in eval semantics
            self.model, self.param_feeds = side.model, {}
        graph = self.model.graph
        self.nodes = list(graph.node)
        self.uses = [node_uses(n) for n in self.nodes]
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.external = has_external(self.model)
        self.workdir = tempfile.TemporaryDirectory(prefix="onnxport-compare-")

    def close(self) -> None:
        self.workdir.cleanup()

    def exposing(self, names: list[str]) -> onnx.ModelProto:
        """A model computing `names` (and only what they need), as its outputs."""
        needed, stack, seen = set(), list(names), set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            i = self.producer.get(name)
            if i is not None and i not in needed:
                needed.add(i)
                stack.extend(self.uses[i])
        src = self.model
        out = onnx.ModelProto(ir_version=src.ir_version, producer_name=src.producer_name)
        out.opset_import.extend(src.opset_import)
        out.functions.extend(src.functions)
        g = out.graph
        g.name = src.graph.name
        g.node.extend(self.nodes[i] for i in sorted(needed))
        g.input.extend(vi for vi in src.graph.input if vi.name in seen)
        g.initializer.extend(t for t in src.graph.initializer if t.name in seen)
        g.sparse_initializer.extend(t for t in src.graph.sparse_initializer if t.values.name in seen)
        g.output.extend(onnx.ValueInfoProto(name=n) for n in names)
        eval_semantics(g)  # a no-op on an eval graph's reference (reference_model did it)
        return out

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        model = self.exposing(names)
        sess = session(model, label=self.label, workdir=Path(self.workdir.name),
                       external_folder=self.folder if self.external else None)
        full = {**feed, **self.param_feeds}
        values = run(sess, names, adapt_feed(full, sess), label=self.label, shown=list(feed))
        del sess
        return dict(zip(names, values))

    def sizes(self, names: list[str], feed: dict[str, np.ndarray]) -> dict[str, int | None]:
        """Bytes of each tensor of `names` with the feed's input shapes, where inference knows."""
        copy = strip_weights(self.model)
        for vi in copy.graph.input:
            value = feed.get(vi.name, self.param_feeds.get(vi.name))
            if value is None or not vi.type.HasField("tensor_type"):
                continue
            shape = vi.type.tensor_type.shape
            shape.ClearField("dim")
            for d in np.shape(value):
                shape.dim.add().dim_value = int(d)
        try:
            infos = {vi.name: vi for vi in inferred_value_infos(copy)}
        except Exception:  # noqa: BLE001 - estimates only: an unknown size is measured by running
            infos = {}
        return {n: _nbytes(infos.get(n)) for n in names}


def _nbytes(vi: onnx.ValueInfoProto | None) -> int | None:
    if vi is None or not vi.type.HasField("tensor_type"):
        return None
    t = vi.type.tensor_type
    bits = element_bits(t.elem_type) if t.elem_type else None
    if not bits or not t.HasField("shape"):
        return None
    n = 1
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        n *= d.dim_value
    return n * bits // 8
