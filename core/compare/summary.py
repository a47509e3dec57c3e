"""A comparison as a few lines a person reads: the summary, then the top differences.

Contract: `summary_lines(report, top)` returns plain text lines (names from files are shown as
they are; the CLI makes them safe for a terminal): for two models the node and weight counts,
opset/IR/input/output changes, the top `top` added, removed and changed nodes and changed
weights, each output's figures, the tensors compared and the first divergence; for two
parameter files the counts per status and the `top` most changed parameters.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from onnxport.core.compare.compare import CompareReport
from onnxport.core.compare.stats import DiffStats


def _figures(s: DiffStats | None) -> str:
    if s is None:
        return ""
    if s.shape_differs:
        return f"shape {list(s.shape_a)} vs {list(s.shape_b)}"
    extra = f", {s.nonfinite} non-finite differ" if s.nonfinite else ""
    return f"max abs {s.max_abs:.3g}, rel L2 {s.rel_l2:.3g}, cosine {s.cosine:.6f}{extra}"


def summary_lines(r: CompareReport, top: int = 10) -> list[str]:
    head = f"compare {Path(r.a).name} vs {Path(r.b).name}"
    if r.parameters is not None:
        return [head] + _parameter_lines(r, top)
    lines = [head] + _structure_lines(r, top)
    if r.numeric is not None:
        lines += _numeric_lines(r, top)
    verdict = "they differ beyond tolerance" if r.differs else "no difference beyond tolerance"
    return lines + [f"verdict: {verdict} ({r.tolerance.describe()})"]


def _ops(entries: list[dict]) -> str:
    counts = Counter(e["op"] for e in entries)
    return ", ".join(f"{op} x{n}" for op, n in counts.most_common(6)) + (", ..." if len(counts) > 6 else "")


def _structure_lines(r: CompareReport, top: int) -> list[str]:
    s = r.structure
    m = len(s.matching.nodes)
    lines = [f"structure: {s.nodes_a} vs {s.nodes_b} nodes, {m} matched ({s.renamed} renamed); "
             f"{len(s.nodes_added)} added, {len(s.nodes_removed)} removed, {len(s.nodes_changed)} changed; "
             f"weights: {len(s.weights_changed)} changed, {len(s.weights_added)} added, "
             f"{len(s.weights_removed)} removed, {s.weights_same} same"]
    for domain, v in s.opsets.items():
        lines.append(f"  opset {domain}: {v['a']} -> {v['b']}")
    if s.ir_version[0] != s.ir_version[1]:
        lines.append(f"  IR version: {s.ir_version[0]} -> {s.ir_version[1]}")
    for what, io in (("input", s.inputs), ("output", s.outputs)):
        lines += [f"  {what} added: {e['name']} {e['type']}" for e in io["added"]]
        lines += [f"  {what} removed: {e['name']} {e['type']}" for e in io["removed"]]
        lines += [f"  {what} changed: {e['name']} {e['type']} -> {e['name_b']} {e['type_b']}" for e in io["changed"]]
    if s.nodes_added:
        lines.append(f"  added: {_ops(s.nodes_added)}")
    if s.nodes_removed:
        lines.append(f"  removed: {_ops(s.nodes_removed)}")
    for c in s.nodes_changed[:top]:
        lines.append(f"  changed {c.name} ({c.op}): {'; '.join(c.changes[:3])}" + ("; ..." if len(c.changes) > 3 else ""))
    if len(s.nodes_changed) > top:
        lines.append(f"  ... and {len(s.nodes_changed) - top} more changed nodes")
    for w in s.weights_changed[:top]:
        lines.append(f"  weight {w.name} ({w.kind}): {_figures(w.stats)}")
    if len(s.weights_changed) > top:
        lines.append(f"  ... and {len(s.weights_changed) - top} more changed weights")
    return lines


def _numeric_lines(r: CompareReport, top: int) -> list[str]:
    n = r.numeric
    lines = [f"numbers on {n.inputs} ({n.runs} runs of each model):"]
    for o in n.outputs:
        mark = "DIFF" if o.departs else "same"
        name = o.name if o.name == o.name_b else f"{o.name} / {o.name_b}"
        lines.append(f"  {mark} output {name}: {_figures(o.stats)}")
    departing = [t for t in n.tensors if t.departs]
    lines.append(f"  {len(n.tensors)} intermediate tensors compared, {len(departing)} depart beyond tolerance")
    f = n.first_divergence
    if f is None:
        lines.append("  first divergence: none")
    else:
        lines.append(f"  first divergence: {f.node} ({f.op}), tensor {f.name}: {_figures(f.stats)}")
    worst = sorted(departing, key=lambda t: -(t.stats.rel_l2 if t.stats.rel_l2 == t.stats.rel_l2 else 1e300))
    lines += [f"  worst: {t.node} ({t.op}) {t.name}: {_figures(t.stats)}" for t in worst[:min(top, 5)]]
    return lines


def _parameter_lines(r: CompareReport, top: int) -> list[str]:
    counts = Counter(p.status for p in r.parameters)
    lines = ["parameters: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("changed", "shape", "only_a", "only_b",
                                                                            "same"))]
    for p in [p for p in r.parameters if p.status != "same"][:top]:
        detail = _figures(p.stats) if p.stats is not None else (
            f"{p.dtype}{p.shape} vs {p.dtype_b}{p.shape_b}" if p.status == "shape" else "")
        lines.append(f"  {p.status} {p.name}" + (f": {detail}" if detail else ""))
    verdict = "they differ beyond tolerance" if r.differs else "no difference beyond tolerance"
    return lines + [f"verdict: {verdict} ({r.tolerance.describe()})"]
