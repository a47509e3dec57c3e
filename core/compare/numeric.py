"""Both models on the same inputs: every matched tensor compared, and where they first part.

Contract: `numeric_diff(a, b, structure, inputs, tolerance, ...)` returns a `NumericDiff`:
- inputs: given, or generated as validation does (fitted to the side without a checkpoint);
  the other side gets them under its matched input names (by name, else position);
- `outputs`: every matched pair where either tensor is a graph output (an export's outputs are
  found among its eval graph's tensors), over every batch;
- `tensors`: every other matched node output, on the first batch, in A's topological order; run
  in batches of at most `budget` bytes of exposed tensors (`runs.Runner`), A's batch held while
  B's runs, then compared piece by piece and dropped: memory is one pass of each model plus two
  batches, never every tensor of both runs (`budget=None` exposes all at once, for measuring);
- `first_divergence`: the earliest node of A (topological order) with an output that departs
  beyond tolerance while none of its compared inputs does; None when nothing departs. A tensor no
  run can expose (a sequence's) is left out and listed in `skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from onnxport.core.compare.node_match import Matching
from onnxport.core.compare.runs import Runner
from onnxport.core.compare.sides import ModelSide
from onnxport.core.compare.stats import DEFAULT_TOLERANCE, Accumulator, DiffStats, Tolerance
from onnxport.core.compare.structure import StructureDiff
from onnxport.core.evaluate.feeds import FeedsLike, FeedSource
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

EXPOSED_BYTES = 96 << 20  # tensors one run exposes at most (A's are held while B's run)
FIRST_BATCH = 8  # tensors per run while no size is known
BATCHES = 2  # generated input batches for the outputs


@dataclass
class TensorResult:
    name: str
    name_b: str
    node: str
    op: str
    stats: DiffStats
    departs: bool
    node_b: str = ""

    def to_dict(self) -> dict:
        out = {"name": self.name, "node": self.node, "op": self.op, **self.stats.to_dict(), "departs": self.departs}
        if self.name_b != self.name:
            out["name_b"] = self.name_b
        if self.node_b != self.node:
            out["node_b"] = self.node_b
        return out


@dataclass
class NodeError:
    """What one matched node adds: its worst output's relative L2 over its worst compared input's
    (the scale the app paints, as the error overlay does)."""

    node: str
    node_b: str
    op: str
    rel_l2: float
    added: float
    nonfinite: bool
    departs: bool

    def to_dict(self) -> dict:
        return {"node": self.node, "node_b": self.node_b, "op": self.op, "rel_l2": _finite(self.rel_l2),
                "added": _finite(self.added), "nonfinite": self.nonfinite, "departs": self.departs}


def _finite(v: float) -> float | None:
    return v if v == v and abs(v) != float("inf") else None


@dataclass
class NumericDiff:
    inputs: str
    tolerance: Tolerance
    outputs: list[TensorResult] = field(default_factory=list)
    tensors: list[TensorResult] = field(default_factory=list)
    first_divergence: TensorResult | None = None
    runs: int = 0
    nodes: list[NodeError] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # tensors no run could expose, and why

    @property
    def differs(self) -> bool:
        return any(o.departs for o in self.outputs)

    def to_dict(self) -> dict:
        return {"inputs": self.inputs, "tolerance": self.tolerance.to_dict(),
                "outputs": [o.to_dict() for o in self.outputs], "tensors": [t.to_dict() for t in self.tensors],
                "first_divergence": self.first_divergence.to_dict() if self.first_divergence else None,
                "nodes": [n.to_dict() for n in self.nodes], "skipped": self.skipped, "runs": self.runs}


def numeric_diff(a: ModelSide, b: ModelSide, structure: StructureDiff, inputs: FeedsLike = None,
                 tolerance: Tolerance = DEFAULT_TOLERANCE, *, budget: int | None = EXPOSED_BYTES,
                 progress: Reporter | None = None, dim_sizes: Mapping[str, int] | None = None,
                 shapes: Mapping[str, tuple[int, ...]] | None = None) -> NumericDiff:
    """See the module docstring."""
    report = progress or Reporter()
    m = structure.matching
    outputs, tensors = _pairs(m)
    if not outputs and not tensors:
        raise OnnxportError(f"{a.label} and {b.label} share no tensor to compare (no node or output matches)")
    report(0.0, "choosing inputs")
    feeds = _feeds(a, b, inputs, dim_sizes, shapes, report)
    runner_a = Runner(a, [p[0] for p in outputs + tensors])
    runner_b = Runner(b, [p[1] for p in outputs + tensors])
    result = NumericDiff(feeds.description, tolerance)
    try:
        result.outputs = _compare_outputs(runner_a, runner_b, m, outputs, feeds, tolerance, report.sub(0.0, 0.3),
                                          result)
        first = _feed_pair(m, feeds.first())
        result.tensors = _compare_tensors(runner_a, runner_b, m, tensors, first, tolerance, budget,
                                          report.sub(0.3, 1.0), result)
    finally:
        runner_a.close()
        runner_b.close()
    result.first_divergence = first_divergence(m, result.outputs + result.tensors)
    result.nodes = node_errors(m, result.outputs + result.tensors)
    return result


def _pairs(m: Matching) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(A tensor, B tensor) pairs: those where either is a graph output, then the other node outputs."""
    a, b = m.a, m.b
    graph_outputs = set(a.graph_outputs)
    graph_outputs_b = set(b.graph_outputs)
    outputs, tensors = [], []
    for ia in a.order:
        ib = m.nodes.get(ia)
        if ib is None or a.ops[ia] == "Constant":
            continue
        for ta, tb in zip(a.outputs[ia], b.outputs[ib]):
            if ta and tb and m.tensors.get(ta) == tb:
                (outputs if ta in graph_outputs or tb in graph_outputs_b else tensors).append((ta, tb))
    seen = set(outputs)
    for tb in b.graph_outputs:  # an output matched to a tensor of A made by an unmatched node
        ta = m.tensors_back.get(tb)
        if ta and ta in a.producer and (ta, tb) not in seen:
            outputs.append((ta, tb))
    return outputs, tensors


def _feeds(a: ModelSide, b: ModelSide, inputs: FeedsLike, dim_sizes, shapes, report: Reporter) -> FeedSource:
    """Inputs fitted to the side without a checkpoint (whose inputs are all data), keyed by A's names."""
    data, other = (b, a) if a.params is not None else (a, b)
    if data.params is not None and inputs is None:
        raise OnnxportError("both sides take checkpoints: give the inputs to run them on (--inputs DATA)")
    refs = [] if other.params is not None else [other.path]
    return fitted_feeds(data.path, inputs, model=data.model, references=refs, count=BATCHES,
                        dim_sizes=dim_sizes, shapes=shapes, cancel=report.token)


def _feed_pair(m: Matching, feed: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The same values under each side's input names (matched by name, else position)."""
    inputs_a, inputs_b = set(m.a.graph_inputs), set(m.b.graph_inputs)
    fa, fb = {}, {}
    for name, value in feed.items():
        if name in inputs_a:
            fa[name] = value
            fb[m.tensors.get(name, name)] = value
        elif name in inputs_b:
            fb[name] = value
            fa[m.tensors_back.get(name, name)] = value
    return fa, fb


def _compare_outputs(ra: Runner, rb: Runner, m: Matching, pairs, feeds: FeedSource, tol: Tolerance,
                     report: Reporter, result: NumericDiff) -> list[TensorResult]:
    if not pairs:
        return []
    acc = {p: Accumulator() for p in pairs}
    total = max(len(feeds), 1)
    for k, feed in enumerate(feeds):
        report.check()
        report(k / total, f"comparing outputs (batch {k + 1}/{total})")
        fa, fb = _feed_pair(m, feed)
        got_a = ra.run([p[0] for p in pairs], fa)
        got_b = rb.run([p[1] for p in pairs], fb)
        result.runs += 1
        for p in pairs:
            _add(acc[p], got_a[p[0]], got_b[p[1]])
        del got_a, got_b
    return [_result(m, p, acc[p].stats(), tol) for p in pairs]


def _compare_tensors(ra: Runner, rb: Runner, m: Matching, pairs, feeds: tuple[dict, dict], tol: Tolerance,
                     budget: int | None, report: Reporter, result: NumericDiff) -> list[TensorResult]:
    fa, fb = feeds
    sizes = ra.sizes([p[0] for p in pairs], fa) if budget is not None and pairs else {}
    results, done, measured = [], 0, []
    while done < len(pairs):
        report.check()
        report(done / len(pairs), f"comparing tensors ({done}/{len(pairs)})")
        batch = _next_batch(pairs, done, sizes, measured, budget)
        for p, va, vb in _run_batch(ra, rb, batch, fa, fb, result):
            acc = Accumulator()
            _add(acc, va, vb)
            measured.append(getattr(va, "nbytes", 0))
            results.append(_result(m, p, acc.stats(), tol))
        done += len(batch)
    return results


def _run_batch(ra: Runner, rb: Runner, batch: list, fa: dict, fb: dict, result: NumericDiff):
    """(pair, A's value, B's value) for each pair of `batch` both runs could expose. A tensor
    ONNX Runtime cannot expose (a sequence's, an optional's) fails its batch: the batch is run
    again in halves, and that tensor alone is left out (`result.skipped`)."""
    try:
        got_a = ra.run([p[0] for p in batch], fa)
        got_b = rb.run([p[1] for p in batch], fb)
    except OnnxportError as exc:
        if len(batch) == 1:
            result.skipped.append({"name": batch[0][0], "reason": exc.one_line()})
            return
        half = len(batch) // 2
        yield from _run_batch(ra, rb, batch[:half], fa, fb, result)
        yield from _run_batch(ra, rb, batch[half:], fa, fb, result)
        return
    result.runs += 1
    for p in batch:
        yield p, got_a[p[0]], got_b[p[1]]


def _next_batch(pairs, start: int, sizes: dict, measured: list[int], budget: int | None) -> list:
    if budget is None:
        return pairs[start:]
    guess = 2 * int(np.mean(measured)) if measured else None
    batch, total = [], 0
    for p in pairs[start:]:
        size = sizes.get(p[0]) or guess
        if size is None and len(batch) >= FIRST_BATCH:
            break
        if batch and total + (size or 0) > budget:
            break
        batch.append(p)
        total += size or 0
    return batch


def _add(acc: Accumulator, va, vb) -> None:
    if not isinstance(va, np.ndarray) or not isinstance(vb, np.ndarray):  # a sequence or an optional
        return
    acc.add(va.reshape(-1), vb.reshape(-1), va.shape, vb.shape)


def _result(m: Matching, pair: tuple[str, str], stats: DiffStats, tol: Tolerance) -> TensorResult:
    ta, tb = pair
    made = m.a.made(ta)
    node, op = (m.a.label(made[0]), m.a.ops[made[0]]) if made else ("", "")
    made_b = m.b.made(tb)
    node_b = m.b.label(made_b[0]) if made_b else ""
    return TensorResult(ta, tb, node, op, stats, stats.count > 0 and tol.departs(stats) or stats.shape_differs,
                        node_b)


def first_divergence(m: Matching, results: list[TensorResult]) -> TensorResult | None:
    """See the module docstring."""
    by_name = {r.name: r for r in results}
    a = m.a
    for ia in a.order:
        outs = [by_name[t] for t in a.outputs[ia] if t in by_name]
        departing = [r for r in outs if r.departs]
        if not departing:
            continue
        ins = [by_name.get(t) or by_name.get(a.root(t)) for t in a.inputs[ia] if t]
        if not any(r is not None and r.departs for r in ins):
            return max(departing, key=lambda r: r.stats.rel_l2 if r.stats.rel_l2 == r.stats.rel_l2 else 0.0)
    return None


def _rel(r: TensorResult) -> float:
    v = r.stats.rel_l2
    return float("inf") if r.stats.nonfinite or r.stats.shape_differs or v != v else v


def node_errors(m: Matching, results: list[TensorResult]) -> list[NodeError]:
    """One `NodeError` per node of A with a compared output, in A's topological order."""
    by_name = {r.name: r for r in results}
    a = m.a
    found = []
    for ia in a.order:
        outs = [by_name[t] for t in a.outputs[ia] if t in by_name]
        if not outs:
            continue
        ins = [r for t in a.inputs[ia] if t and (r := by_name.get(t) or by_name.get(a.root(t))) is not None]
        worst_out = max(_rel(r) for r in outs)
        worst_in = max((_rel(r) for r in ins), default=0.0)
        nonfinite = worst_out == float("inf") and worst_in != float("inf")
        added = 1.0 if nonfinite else 0.0 if worst_in == float("inf") else max(worst_out - worst_in, 0.0)
        found.append(NodeError(a.label(ia), outs[0].node_b, a.ops[ia], worst_out, added, nonfinite,
                               any(r.departs for r in outs)))
    return found
