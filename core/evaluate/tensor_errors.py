"""Where a quantized (or float16) model loses accuracy: the error of every tensor it shares with its
float reference, the error each node adds, and the first tensor where the error jumps.

Why: sensitivity.py ranks what to keep in float; this says where the error comes from, on the
whole graph (the app paints it on the preview, the report names the jump). Contract:
- `tensor_errors(model, reference, feed)` runs both models once and returns `TensorErrors`:
  `tensors` maps every float tensor both produce to (relative L2 error, cosine); `nodes` holds one
  `LayerError` per reference node with a compared output; `first_jump` is the first node in
  topological order adding at least `threshold` (or making non-finite values), else None.
- `from_measured(reference, errors)` does the same from errors already measured; `without_kept`
  drops the nodes a quantize run kept in float (`in_reference` names them in the reference).
- `to_dict()` is bounded for the report: counts, the first jump, the `TOP_TENSORS` worst tensors,
  per-node figures for at most `NODE_LIMIT` nodes adding a measurable error; no tensor values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.runtime import load_full
from onnxport.core.evaluate.sensitivity import MEASURABLE, LayerError, layer_errors, measure_tensors
from onnxport.core.graph.runnable import topological_order

JUMP = 0.01  # a node adding 1% relative L2 error (or more) over its inputs is where the error jumps
TOP_TENSORS = 10
NODE_LIMIT = 1000


@dataclass
class TensorErrors:
    tensors: dict[str, tuple[float, float]]  # tensor -> (relative L2 error, cosine), reference order
    producers: dict[str, tuple[str, str]]  # tensor -> (node name, op type) in the reference
    nodes: list[LayerError] = field(default_factory=list)  # topological order of the reference
    first_jump: LayerError | None = None
    threshold: float = JUMP

    def node(self, name: str) -> LayerError | None:
        return next((e for e in self.nodes if e.node == name), None)

    def measurable(self) -> list[LayerError]:
        """Nodes adding a measurable error, the most first."""
        shown = [e for e in self.nodes if e.nonfinite or e.added >= MEASURABLE]
        return sorted(shown, key=lambda e: (not e.nonfinite, -e.added, e.node))

    def jump_line(self) -> str:
        if not self.tensors:
            return "no tensor shared with the reference to compare"
        if self.first_jump is None:
            return f"no node adds {self.threshold:g} relative error or more (the error never jumps)"
        e = self.first_jump
        how = "turns non-finite" if e.nonfinite else f"{e.added:+.4f} relative error"
        return f"the error jumps first at tensor {e.tensor}, made by {e.node} ({e.op_type}): {how}"

    def to_dict(self) -> dict:
        worst = sorted(self.tensors.items(), key=lambda kv: -_sortable(kv[1][0]))[:TOP_TENSORS]
        return {
            "threshold": self.threshold, "tensors_compared": len(self.tensors), "nodes_compared": len(self.nodes),
            "first_jump": self.first_jump.to_dict() if self.first_jump else None,
            "worst_tensors": [{"tensor": t, "node": self.producers.get(t, ("", ""))[0],
                               "op_type": self.producers.get(t, ("", ""))[1],
                               "rel_error": _num(rel), "cosine": _num(cos)} for t, (rel, cos) in worst],
            "nodes": [e.to_dict() for e in self.measurable()[:NODE_LIMIT]],
        }


def in_reference(reference: onnx.ModelProto, names: list[str]) -> set[str]:
    """Reference nodes standing for `names` (nodes of the quantized frame): the same name, or the
    name ORT's pre-processing gave a fusion of it (`name/<Fusion>`)."""
    prefixes = {"/".join(n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 2)}
    return {n.name for n in reference.graph.node if n.name and n.name in prefixes}


def without_kept(report, kept: set[str]) -> None:
    """`report` (a ValidationReport) without per-node figures for the nodes a run kept in float
    (reference names): they add no error of their own, and the first jump is never one of them."""
    def blamed(e: LayerError) -> bool:
        return not (set(e.group) | {e.node}) & kept

    report.layers = [e for e in report.layers if blamed(e)]
    t = report.tensors
    if t is not None:
        t.nodes = [e for e in t.nodes if blamed(e)]
        t.first_jump = next((e for e in t.nodes if e.nonfinite or e.added >= t.threshold), None)


def tensor_errors(model: str | Path | onnx.ModelProto, reference: str | Path | onnx.ModelProto,
                  feed: dict[str, np.ndarray], *, threshold: float = JUMP, workdir: Path | None = None) -> TensorErrors:
    """See the module docstring."""
    cand = model if isinstance(model, onnx.ModelProto) else load_full(model)
    ref = reference if isinstance(reference, onnx.ModelProto) else load_full(reference)
    return from_measured(ref, measure_tensors(cand, ref, feed, workdir=workdir), threshold=threshold, model=cand)


def from_measured(reference: onnx.ModelProto, errors: dict[str, tuple[float, float]], *,
                  threshold: float = JUMP, model: onnx.ModelProto | None = None) -> TensorErrors:
    """A `TensorErrors` from `measure_tensors(model, reference, ...)`'s answer (no model is run)."""
    producers = {o: (n.name or o, n.op_type) for n in reference.graph.node for o in n.output if o}
    if not errors:
        return TensorErrors({}, {}, threshold=threshold)
    ranked = layer_errors(model if model is not None else reference, reference, {}, only_changed=False,
                         errors=errors)
    made_by = {o: i for i, n in enumerate(reference.graph.node) for o in n.output if o}
    by_index = {made_by[e.tensor]: e for e in ranked if e.tensor in made_by}
    nodes = [by_index[i] for i in topological_order(list(reference.graph.node)) if i in by_index]
    jump = next((e for e in nodes if e.nonfinite or e.added >= threshold), None)
    return TensorErrors(dict(errors), {t: producers[t] for t in errors if t in producers}, nodes, jump, threshold)


def _sortable(value: float) -> float:
    return math.inf if not math.isfinite(value) else value


def _num(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None
