"""Which nodes make a quantized (or float16) model differ from its float32 original.

Contract: `layer_errors(model, reference, feed)` runs both models on `feed`, every float tensor
of the reference that the model also produces exposed as an output (on the first rows of a batch
whose tensors fit `TENSOR_BYTES`), and returns one
`LayerError` per reference node with a compared output: the relative L2 error of that output and
how much error the node *added* over the worst of its compared inputs. Nodes the quantizer fused
away are grouped with the compared node after them (`group`: keeping one in float keeps the group).
Sorted by added error, worst first. Memory: about 2 x `TENSOR_BYTES` of tensors. `taken_branches`
inlines the If branches a feed takes, so the comparison reaches into them.

`added` is always finite: a node whose output turns non-finite where its inputs did not adds 1.0
(`nonfinite` set); one whose inputs already were adds 0.0. `ranking_lines` prints only the nodes
adding at least `MEASURABLE`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.compare import vector_dot
from onnxport.core.evaluate.runtime import adapt_feed, load_full, precision_of, session
from onnxport.core.graph.index import infer_value_info

TENSOR_BYTES = 64 << 20  # the reference's exposed tensors in one run (the model's as many): fewer rows past it
INLINED_DEPTH = 4  # nested Ifs inlined for the comparison (silero VAD: an If in the main graph, three in each branch)
MEASURABLE = 5e-5  # added relative error below this prints as +0.0000: not worth naming
FUSED_ACTIVATIONS = {"Relu", "Clip"}  # what ORT's QDQ quantizer removes into the QuantizeLinear after
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


@dataclass
class LayerError:
    node: str
    op_type: str
    tensor: str
    rel_error: float
    cosine: float
    added: float
    group: list[str] = field(default_factory=list)  # the node and upstream nodes fused with it
    nonfinite: bool = False  # its output went non-finite (or to zero) where its inputs had not

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else round(v, 6) if isinstance(v, float)
                    else v) for k, v in asdict(self).items()}

    def describe(self) -> str:
        if self.nonfinite:
            return f"{self.node} ({self.op_type}): makes non-finite or zero values the float model does not"
        return f"{self.node} ({self.op_type}): {self.added:+.4f} relative error (cosine {self.cosine:.5f})"


def ranked_nodes(layers: list[LayerError], n: int = 5) -> list[str]:
    """The first `n` nodes adding a measurable error."""
    return [e.node for e in layers if e.nonfinite or (math.isfinite(e.added) and e.added >= MEASURABLE)][:n]


def ranking_lines(layers: list[LayerError], n: int = 5) -> list[str]:
    """The ranking as text: the first `n` nodes adding a measurable error, or a line saying none does."""
    shown = [e for e in layers if e.nonfinite or (math.isfinite(e.added) and e.added >= MEASURABLE)][:n]
    if not layers:
        return []
    if not shown:
        return ["no single node adds a measurable error (each under 0.0001 relative)"]
    return ["nodes adding the most error:"] + ["  " + e.describe() for e in shown]


def _as_model(model: str | Path | onnx.ModelProto) -> onnx.ModelProto:
    return model if isinstance(model, onnx.ModelProto) else load_full(model)


def compared_tensors(model: onnx.ModelProto, reference: onnx.ModelProto) -> list[str]:
    """Float tensors produced by reference nodes that the model produces too, in graph order. An
    activation the quantizer fused away (QDQ drops a Relu/Clip after a Conv/MatMul and lets the
    quantization clamp) leaves its name on the pre-activation tensor: not the same value, not compared."""
    produced = kept_tensors(model, reference)
    types = infer_value_info(reference)
    names = []
    for node in reference.graph.node:
        if node.op_type == "Constant":
            continue
        for out in node.output:
            vi = types.get(out)
            if out and out in produced and vi is not None and vi.type.tensor_type.elem_type in _FLOAT_TYPES:
                names.append(out)
    return names


def kept_tensors(model: onnx.ModelProto, reference: onnx.ModelProto) -> set[str]:
    """Tensors of `model` (inputs, node outputs) holding what the reference's tensor of that name
    holds: all but the outputs of a fused-away activation (see `compared_tensors`)."""
    made_by = {o: n.op_type for n in model.graph.node for o in n.output if o}
    fused = {o for n in reference.graph.node if n.op_type in FUSED_ACTIVATIONS  # QOperator: dequantized, kept
             for o in n.output if made_by.get(o, n.op_type) not in (n.op_type, "DequantizeLinear")}
    return (set(made_by) | {i.name for i in model.graph.input}) - fused


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    for name in names:
        if name not in have:
            copy.graph.output.append(onnx.ValueInfoProto(name=name))  # ORT infers the type
    return copy


def changed_nodes(model: onnx.ModelProto, reference: onnx.ModelProto) -> set[str]:
    """Reference nodes the quantizer touched: replaced (name/op gone), or fed from new tensors (QDQ).

    A float16 model converts nodes in place, so there every node counts.
    """
    if precision_of(model) == "float16":
        return {n.name for n in reference.graph.node}
    cand = {(n.name, n.op_type): n for n in model.graph.node}
    changed = set()
    for node in reference.graph.node:
        twin = cand.get((node.name, node.op_type))
        if twin is None or list(twin.input) != list(node.input):
            changed.add(node.name)
    return changed


def quantizable_op_types() -> set[str]:
    """Op types ONNX Runtime's quantizers quantize (dynamic, QOperator and QDQ), plus Gemm."""
    from onnxruntime.quantization.registry import IntegerOpsRegistry, QDQRegistry, QLinearOpsRegistry

    return set(IntegerOpsRegistry) | set(QDQRegistry) | set(QLinearOpsRegistry) | {"Gemm"}


def layer_errors(model: str | Path | onnx.ModelProto, reference: str | Path | onnx.ModelProto,
                 feed: dict[str, np.ndarray], *, workdir: Path | None = None,
                 only_changed: bool = True, op_types: set[str] | None = None,
                 errors: dict[str, tuple[float, float]] | None = None) -> list[LayerError]:
    """See the module docstring. `only_changed` keeps the nodes the quantizer touched whose op type it
    quantizes (`op_types`, default: any ORT quantizes; every op for a float16 model): the ones that
    can be kept in float. Float nodes downstream only pass on (or, near zero, blow up in relative
    terms) the error of their inputs; keeping them in float changes nothing. `errors`: what
    `measure_tensors` returned for this pair and feed (the models are then not run again)."""
    cand, ref = _as_model(model), _as_model(reference)
    touched = None
    if only_changed:
        touched = changed_nodes(cand, ref)
        if precision_of(cand) != "float16":
            allowed = op_types or quantizable_op_types()
            touched = {n.name for n in ref.graph.node if n.name in touched and n.op_type in allowed}
    if errors is None:
        errors = measure_tensors(cand, ref, feed, workdir=workdir)
    if not errors:
        return []
    producer = {o: node for node in ref.graph.node for o in node.output if o}
    kept = kept_tensors(cand, ref) if cand is not ref else set()  # no model: what was measured says
    types: dict = {}

    def integer_kept(name: str) -> bool:
        """A tensor the model still has, known not to be float (shape arithmetic): a group's edge."""
        if name not in kept:
            return False
        if not types:
            types.update(infer_value_info(ref) or {"": None})  # once, and only when a walk gets here
        vi = types.get(name)
        return vi is not None and vi.type.tensor_type.elem_type not in _FLOAT_TYPES
    result = []
    for node in ref.graph.node:
        outs = [o for o in node.output if o in errors]
        if not outs:
            continue
        group, frontier = _fused_group(node, producer, errors, integer_kept)
        if touched is not None:
            group = [g for g in group if g in touched]
            if not group:
                continue
        worst_in = max((errors[i][0] for i in frontier), default=0.0)
        out = max(outs, key=lambda o: errors[o][0])
        rel, cos = errors[out]
        nonfinite = not math.isfinite(rel) and math.isfinite(worst_in)
        added = 1.0 if nonfinite else 0.0 if not math.isfinite(worst_in) else rel - worst_in
        result.append(LayerError(node.name or out, node.op_type, out, rel, cos, added, group, nonfinite))
    result.sort(key=lambda e: (not e.nonfinite, -e.added, e.node))
    return result


def measure_tensors(model: str | Path | onnx.ModelProto, reference: str | Path | onnx.ModelProto,
                    feed: dict[str, np.ndarray], *, workdir: Path | None = None) -> dict[str, tuple[float, float]]:
    """(relative L2 error, cosine) of every `compared_tensors` tensor, in the reference's graph order:
    both models run once on (the first rows of, `_bounded_rows`) `feed` with those tensors exposed."""
    cand, ref = _as_model(model), _as_model(reference)
    names = compared_tensors(cand, ref)
    if not names:
        return {}
    ref_sess = session(_with_outputs(ref, names), label="reference", workdir=workdir)
    cand_sess = session(_with_outputs(cand, names), label="model", workdir=workdir)
    feed = _bounded_rows(feed, ref_sess, names)
    want = dict(zip(names, ref_sess.run(names, adapt_feed(feed, ref_sess))))
    got = dict(zip(names, cand_sess.run(names, adapt_feed(feed, cand_sess))))
    return {name: _rel_error(got[name], want[name]) for name in names}


def taken_branches(model: onnx.ModelProto, reference: onnx.ModelProto, feed: dict[str, np.ndarray], *,
                   workdir: Path | None = None) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Copies of both models with each If of the main graph replaced by the branch the reference takes
    on `feed` (its nodes in the main graph, an Identity per output), again for the Ifs that branch
    holds, `INLINED_DEPTH` deep: the per-tensor comparison then reaches into the branch and blames
    the node there that adds the error, not the If or the Identity after it (silero VAD). Models
    without an If come back as they are (no copy, no run)."""
    for _ in range(INLINED_DEPTH):
        ifs = [n for n in reference.graph.node if n.op_type == "If" and n.name and n.input]
        if not ifs:
            break
        names = list(dict.fromkeys(n.input[0] for n in ifs))
        sess = session(_with_outputs(reference, names), label="reference", workdir=workdir)
        values = dict(zip(names, sess.run(names, adapt_feed(feed, sess))))
        taken = {n.name: bool(np.asarray(values[n.input[0]]).reshape(-1)[0]) for n in ifs
                 if np.asarray(values[n.input[0]]).size == 1}
        if not taken:
            break
        model, reference = _inlined(model, taken), _inlined(reference, taken)
    return model, reference


def _inlined(model: onnx.ModelProto, taken: dict[str, bool]) -> onnx.ModelProto:
    """A copy of `model`, each If named in `taken` replaced by its then (True) or else branch."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    nodes = []
    for node in graph.node:
        if node.op_type != "If" or node.name not in taken:
            nodes.append(node)
            continue
        want = "then_branch" if taken[node.name] else "else_branch"
        branch = next((a.g for a in node.attribute if a.name == want), None)
        if branch is None or len(branch.output) != len(node.output):
            nodes.append(node)
            continue
        nodes += list(branch.node)
        graph.initializer.extend(branch.initializer)
        graph.value_info.extend(branch.value_info)
        nodes += [onnx.helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}/{want}/{outer}")
                  for inner, outer in zip(branch.output, node.output) if outer]
    del graph.node[:]
    graph.node.extend(nodes)
    return copy


def _bounded_rows(feed: dict[str, np.ndarray], ref_sess, names: list[str]) -> dict[str, np.ndarray]:
    """The first rows of `feed` whose exposed tensors fit `TENSOR_BYTES` (ORT allocates every exposed
    tensor of a run, fetched or not): measured on one row. Only when every input's first axis has
    the same size N > 1 and none is fixed in the model (a batch); otherwise `feed` as it is."""
    firsts = {np.shape(v)[0] for v in feed.values() if np.ndim(v) >= 1}
    fixed = any(i.shape and isinstance(i.shape[0], int) for i in ref_sess.get_inputs() if i.name in feed)
    if fixed or len(firsts) != 1 or (rows := firsts.pop()) < 2:
        return feed
    one = {k: v[:1] if np.ndim(v) >= 1 else v for k, v in feed.items()}
    per_row = sum(getattr(t, "nbytes", 0) for t in ref_sess.run(names, adapt_feed(one, ref_sess)))
    keep = max(1, min(rows, TENSOR_BYTES // max(per_row, 1)))
    return feed if keep == rows else {k: v[:keep] if np.ndim(v) >= 1 else v for k, v in feed.items()}


def _fused_group(node: onnx.NodeProto, producer: dict[str, onnx.NodeProto], errors: dict,
                 edge: Callable[[str], bool]) -> tuple[list[str], set[str]]:
    """`node` plus the upstream nodes whose outputs the model no longer has (a quantizer fused
    them, e.g. MatMul+Relu into one quantized op), and the compared tensors that feed that group.
    The walk stops at an `edge` tensor: integer shape arithmetic the model keeps is no part of it."""
    group, frontier, seen = [node.name], set(), {node.name}
    stack = list(node.input)
    while stack:
        name = stack.pop()
        if not name or name in frontier:
            continue
        if name in errors:
            frontier.add(name)
            continue
        if edge(name):
            continue
        up = producer.get(name)
        if up is None or up.name in seen or up.op_type == "Constant":
            continue
        seen.add(up.name)
        group.append(up.name)
        stack.extend(up.input)
    return group, frontier


def _rel_error(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    g = np.asarray(got, dtype=np.float64).reshape(-1)
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    if g.shape != w.shape:
        return math.inf, 0.0
    ok = np.isfinite(g) & np.isfinite(w)
    if not ok.all():
        if (np.isfinite(g) != np.isfinite(w)).any():
            return math.inf, 0.0
        g, w = g[ok], w[ok]
    wn, gn = vector_dot(w, w), vector_dot(g, g)
    d = g - w
    dd = vector_dot(d, d)
    rel = math.sqrt(dd / wn) if wn else (0.0 if dd == 0 else math.inf)
    cos = 1.0 if wn == 0 and gn == 0 else (vector_dot(g, w) / math.sqrt(wn * gn) if wn and gn else 0.0)
    return rel, cos
