"""What differs between two graphs: nodes added, removed and changed, weights by content, the rest.

Contract: `structure_diff(side_a, side_b)` matches the nodes (node_match.py), pairs the weights
(by name, by unique content, then by the slot they fill in matched nodes) and returns a
`StructureDiff`: nodes of B without a match (added), of A without one (removed), matched pairs
whose attributes or inputs differ (changed: a node whose input now comes through an inserted
Q/DQ pair is changed); weights whose values differ with max abs and relative L2 of the change
(a Constant node's value counts as a weight, not as a changed attribute), weights only in A or
B; graph inputs and outputs (added, removed, of another type), opsets, IR version, metadata.
Weights are compared piece by piece (stats.py): memory stays one piece whatever their size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from onnxport.core.compare.graph_view import GraphView
from onnxport.core.compare.node_match import Matching, match_graphs
from onnxport.core.compare.sides import ModelSide
from onnxport.core.compare.stats import DiffStats, diff_stats
from onnxport.core.compare.weights import WeightRef, graph_weights
from onnxport.core.graph.uses import GRAPH_ATTRS, bodies, graph_captures, has_bodies
from onnxport.core.util.progress import Reporter

_VALUE_ATTRS = {"value", "sparse_value"}  # a Constant's payload: compared as a weight


@dataclass
class NodeChange:
    name: str
    name_b: str
    op: str
    changes: list[str]

    def to_dict(self) -> dict:
        out = {"name": self.name, "op": self.op, "changes": self.changes}
        if self.name_b != self.name:
            out["name_b"] = self.name_b
        return out


@dataclass
class WeightChange:
    name: str
    name_b: str
    kind: str
    shape: list[int]
    shape_b: list[int]
    dtype: str
    dtype_b: str
    stats: DiffStats

    def to_dict(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "shape": self.shape, "dtype": self.dtype,
               **self.stats.to_dict()}
        if self.name_b != self.name:
            out["name_b"] = self.name_b
        if self.shape_b != self.shape or self.dtype_b != self.dtype:
            out["shape_b"], out["dtype_b"] = self.shape_b, self.dtype_b
        return out


def _weight_entry(w: WeightRef, prefix: str = "") -> dict:
    return {"name": prefix + w.name, "kind": w.kind, "shape": list(w.dims), "dtype": w.dtype}


@dataclass
class StructureDiff:
    nodes_a: int
    nodes_b: int
    matching: Matching
    nodes_added: list[dict] = field(default_factory=list)
    nodes_removed: list[dict] = field(default_factory=list)
    nodes_changed: list[NodeChange] = field(default_factory=list)
    renamed: int = 0
    weights_changed: list[WeightChange] = field(default_factory=list)
    weights_added: list[dict] = field(default_factory=list)
    weights_removed: list[dict] = field(default_factory=list)
    weights_same: int = 0
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    opsets: dict = field(default_factory=dict)
    ir_version: list[int] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    @property
    def differs(self) -> bool:
        return bool(self.nodes_added or self.nodes_removed or self.nodes_changed or self.weights_changed
                    or self.weights_added or self.weights_removed or any(self.inputs.values())
                    or any(self.outputs.values()) or self.opsets or self.ir_version[0] != self.ir_version[1]
                    or any(self.metadata.values()))

    def to_dict(self) -> dict:
        return {
            "nodes": {"a": self.nodes_a, "b": self.nodes_b, "matched": len(self.matching.nodes),
                      "renamed": self.renamed},
            "nodes_added": self.nodes_added, "nodes_removed": self.nodes_removed,
            "nodes_changed": [c.to_dict() for c in self.nodes_changed],
            "initializers_changed": [w.to_dict() for w in self.weights_changed],
            "initializers_added": self.weights_added, "initializers_removed": self.weights_removed,
            "initializers_same": self.weights_same,
            "inputs": self.inputs, "outputs": self.outputs, "opsets": self.opsets,
            "ir_version": {"a": self.ir_version[0], "b": self.ir_version[1]}, "metadata": self.metadata,
        }


def structure_diff(a: ModelSide, b: ModelSide, progress: Reporter | None = None) -> StructureDiff:
    """See the module docstring."""
    report = progress or Reporter()
    report(None, "matching nodes")
    va, vb = GraphView.of(a.model.graph), GraphView.of(b.model.graph)
    m = _match(va, vb, a.weights, b.weights)
    diff = StructureDiff(len(va), len(vb), m)
    _graph_diff(diff, m, a.model.graph, b.model.graph, a.weights, b.weights, "", report)
    diff.inputs = _io_changes(m, a.model.graph.input, b.model.graph.input)
    diff.outputs = _io_changes(m, a.model.graph.output, b.model.graph.output)
    diff.opsets = _opsets(a.model, b.model)
    diff.ir_version = [a.model.ir_version, b.model.ir_version]
    diff.metadata = _metadata(a.model, b.model)
    diff.weights_changed.sort(key=lambda c: -(c.stats.rel_l2 if c.stats.rel_l2 == c.stats.rel_l2 else 0.0))
    return diff


def _match(va: GraphView, vb: GraphView, wa: dict[str, WeightRef], wb: dict[str, WeightRef],
           outer: dict[str, str] | None = None) -> Matching:
    return match_graphs(va, vb, lambda m: _pair_weights(m, wa, wb), lambda ta, tb: ta in wa and tb in wb, outer)


def _graph_diff(diff: StructureDiff, m: Matching, ga: onnx.GraphProto, gb: onnx.GraphProto,
                wa: dict[str, WeightRef], wb: dict[str, WeightRef], prefix: str, report: Reporter) -> None:
    """One graph's nodes and weights into `diff`, then the bodies of its matched If/Loop/Scan nodes
    (named `node/attribute/...`): a converter changes what those bodies hold."""
    report.check()
    va, vb = m.a, m.b
    diff.nodes_added += [{"name": prefix + vb.label(i), "op": vb.ops[i]} for i in range(len(vb)) if i not in m.back]
    diff.nodes_removed += [{"name": prefix + va.label(i), "op": va.ops[i]} for i in range(len(va)) if i not in m.nodes]
    changes, renamed = _node_changes(m, prefix)
    diff.renamed += renamed
    report(None, "comparing weights")
    _weight_changes(diff, m, wa, wb, prefix, report)
    for change in changes:
        diff.nodes_changed.append(change)
    for ia in va.bodied:  # matched nodes share their op
        ib = m.nodes.get(ia)
        if ib is not None and (has_bodies(va.node(ia)) or has_bodies(vb.node(ib))):
            _body_diffs(diff, m, va.node(ia), vb.node(ib), f"{prefix}{va.label(ia)}/", report)


def _body_diffs(diff: StructureDiff, outer: Matching, na: onnx.NodeProto, nb: onnx.NodeProto, prefix: str,
                report: Reporter) -> None:
    bodies_b = dict(bodies(nb))
    for attr, body_a in bodies(na):
        body_b = bodies_b.get(attr)
        if body_b is None:
            continue
        va, vb = GraphView.of(body_a), GraphView.of(body_b)
        wa, wb = graph_weights(body_a), graph_weights(body_b)
        seen = {t: outer.tensors[t] for t in graph_captures(body_a) if t in outer.tensors}
        _graph_diff(diff, _match(va, vb, wa, wb, seen), body_a, body_b, wa, wb, f"{prefix}{attr}/", report)


def _pair_weights(m: Matching, wa: dict[str, WeightRef], wb: dict[str, WeightRef]) -> None:
    """By name, then by content where a content is unique on both sides (a renamed weight)."""
    for name in wa:
        if name in wb:
            m.pair_tensors(name, name)
    left_a = [n for n in wa if n not in m.tensors]
    left_b = [n for n in wb if n not in m.tensors_back]
    if not left_a or not left_b:
        return
    by_a: dict[bytes, list[str]] = {}
    by_b: dict[bytes, list[str]] = {}
    for names, weights, table in ((left_a, wa, by_a), (left_b, wb, by_b)):
        for n in names:
            table.setdefault(weights[n].digest(), []).append(n)
    for digest, names in by_a.items():
        other = by_b.get(digest)
        if len(names) == 1 and other and len(other) == 1:
            m.pair_tensors(names[0], other[0])


def _node_changes(m: Matching, prefix: str) -> tuple[list[NodeChange], int]:
    """Matched pairs that differ, in A's graph order (as nodes added and removed are listed), and
    how many pairs of named nodes differ in name; pairs `_same_places` found identical are skipped."""
    va, vb, identical = m.a, m.b, m.identical
    names_a, names_b = va.names, vb.names
    renamed = sum(1 for ia, ib in m.nodes.items() if names_a[ia] != names_b[ib] and names_a[ia] and names_b[ib])
    changes = []
    for ia, ib in sorted(m.nodes.items()) if len(identical) < len(m.nodes) else ():
        if ia in identical:
            continue
        found = [] if ia in m.same else _input_changes(m, ia, ib)
        found += _attribute_changes(va.node(ia), vb.node(ib))
        if len(va.outputs[ia]) != len(vb.outputs[ib]):
            found.append(f"outputs: {len(va.outputs[ia])} -> {len(vb.outputs[ib])}")
        if found:
            changes.append(NodeChange(prefix + va.label(ia), prefix + vb.label(ib), va.ops[ia], found))
    return changes, renamed


def _input_changes(m: Matching, ia: int, ib: int) -> list[str]:
    ins_a, ins_b = m.a.inputs[ia], m.b.inputs[ib]
    get = m.tensors.get
    if len(ins_a) == len(ins_b) and all(get(ta) == tb for ta, tb in zip(ins_a, ins_b) if ta):
        if all(tb == "" for ta, tb in zip(ins_a, ins_b) if not ta):
            return []
    found = []
    for slot in range(max(len(ins_a), len(ins_b))):
        ta = ins_a[slot] if slot < len(ins_a) else ""
        tb = ins_b[slot] if slot < len(ins_b) else ""
        expected = m.tensors.get(ta, "?") if ta else ""
        if expected != tb:
            found.append(f"input {slot}: {ta or '-'} -> {tb or '-'}")
    return found


def _attribute_changes(na: onnx.NodeProto, nb: onnx.NodeProto) -> list[str]:
    if na.attribute == nb.attribute:  # one comparison in protobuf's C code: the usual case
        return []
    attrs_a = {x.name: x for x in na.attribute if _compared(na, x)}
    attrs_b = {x.name: x for x in nb.attribute if _compared(nb, x)}
    found = []
    for name in sorted(set(attrs_a) | set(attrs_b)):
        xa, xb = attrs_a.get(name), attrs_b.get(name)
        if xa is None or xb is None:
            found.append(f"attribute {name}: {'added' if xa is None else 'removed'}")
        elif xa.SerializeToString() != xb.SerializeToString():
            found.append(f"attribute {name}: {_shown_attr(xa)} -> {_shown_attr(xb)}")
    return found


def _compared(node: onnx.NodeProto, x: onnx.AttributeProto) -> bool:
    """Attributes compared as attributes: not a Constant's value (a weight), not a body (diffed as a graph)."""
    if x.type in GRAPH_ATTRS:
        return False
    return x.name not in _VALUE_ATTRS or node.op_type != "Constant"


def _shown_attr(x: onnx.AttributeProto) -> str:
    if x.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        return "(graph)"
    if x.type == onnx.AttributeProto.TENSOR:
        return f"(tensor {list(x.t.dims)})"
    value = onnx.helper.get_attribute_value(x)
    text = repr(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _weight_changes(diff: StructureDiff, m: Matching, wa: dict[str, WeightRef], wb: dict[str, WeightRef],
                    prefix: str, report: Reporter) -> None:
    for name, w in wa.items():
        other = m.tensors.get(name)
        if other is None or other not in wb:
            diff.weights_removed.append(_weight_entry(w, prefix))
            continue
        report.check()
        v = wb[other]
        stats = _weight_stats(w, v)
        if stats.identical:
            diff.weights_same += 1
        else:
            diff.weights_changed.append(WeightChange(prefix + name, prefix + other, w.kind, list(w.dims), list(v.dims), w.dtype,
                                                     v.dtype, stats))
    diff.weights_added += [_weight_entry(v, prefix) for n, v in wb.items() if m.tensors_back.get(n) not in wa]


def _weight_stats(w: WeightRef, v: WeightRef) -> DiffStats:
    ta, tb = w.tensor, v.tensor
    if ta is not None and tb is not None and w.elem_type == v.elem_type and w.dims == v.dims:
        raw = ta.raw_data
        if raw and raw == tb.raw_data:  # the same bytes, in one comparison
            return DiffStats(count=w.numel, shape_a=w.dims, shape_b=v.dims)
    return diff_stats(w.values(), v.values(), w.dims, v.dims)


def _type_text(vi: onnx.ValueInfoProto) -> str:
    return onnx.helper.printable_type(vi.type) if vi.HasField("type") else "?"


def _io_changes(m: Matching, values_a, values_b) -> dict:
    by_a = {vi.name: vi for vi in values_a}
    by_b = {vi.name: vi for vi in values_b}
    changed, removed = [], []
    for name, vi in by_a.items():
        other = m.tensors.get(name)
        if other not in by_b:
            removed.append({"name": name, "type": _type_text(vi)})
        elif _type_text(vi) != _type_text(by_b[other]) or other != name:
            changed.append({"name": name, "name_b": other, "type": _type_text(vi), "type_b": _type_text(by_b[other])})
    added = [{"name": n, "type": _type_text(vi)} for n, vi in by_b.items() if m.tensors_back.get(n) not in by_a]
    return {"added": added, "removed": removed, "changed": changed}


def _opsets(a: onnx.ModelProto, b: onnx.ModelProto) -> dict:
    oa = {o.domain or "ai.onnx": o.version for o in a.opset_import}
    ob = {o.domain or "ai.onnx": o.version for o in b.opset_import}
    return {d: {"a": oa.get(d), "b": ob.get(d)} for d in sorted(set(oa) | set(ob)) if oa.get(d) != ob.get(d)}


def _metadata(a: onnx.ModelProto, b: onnx.ModelProto) -> dict:
    pa = {p.key: p.value for p in a.metadata_props}
    pb = {p.key: p.value for p in b.metadata_props}
    for key in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        pa[key], pb[key] = str(getattr(a, key)), str(getattr(b, key))
    return {"changed": sorted(k for k in set(pa) & set(pb) if pa[k] != pb[k]),
            "added": sorted(set(pb) - set(pa)), "removed": sorted(set(pa) - set(pb))}
