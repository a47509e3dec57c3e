"""Float32 -> float16 conversion that keeps in float32 what float16 cannot hold.

Why our own converter: onnxconverter-common's converter changes Constant values even for nodes it
keeps in float (9.8e7 became 65504) and can emit Casts after their consumers (fails the checker).

Contract: `to_float16(model, keep=..., keep_io_types=..., block_ops=...)`, a checked pass (passes.py),
converts `model` in place; its `Fp16Result.kept`: the nodes kept in float32 with why (`{label: reason}`):
- a node runs in float16 when its schema allows it (fp16_nodes.py), it has no sub-graph and is not
  kept (`keep`, `block_ops`, a weight beyond float16's range);
- weights become float16 only when every reader runs in float16 (mixed readers: a float16 copy is
  added); every other tensor keeps its producer's precision, converted through one shared Cast
  placed just before the consumer (topologically sorted first), so the result passes the checker;
- graph inputs and outputs stay float32 with `keep_io_types`;
- If/Loop/Scan bodies are converted the same way, each as a graph of its own with a float32
  interface; an unknown-typed tensor keeps its nodes float32."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.graph.index import infer_value_info
from onnxport.core.graph.passes import ADDED, REWRITTEN, NodeChange, PassResult
from onnxport.core.graph.uses import bodies, graph_captures, has_bodies, subgraph_captures, walk_bodies
from onnxport.core.quantize.fp16_nodes import (
    ATTR,
    FIXED,
    FOLLOW,
    FP16_MAX,
    FREE,
    constant_array,
    detached,
    finite_max,
    node_label,
    node_slots,
    topological_order,
)
from onnxport.core.quantize.passes import checked

FLOAT, HALF = TensorProto.FLOAT, TensorProto.FLOAT16
# Standard ops ONNX Runtime's converter keeps float32 by default (no float16 kernel, or a precision need).
DEFAULT_BLOCK_OPS = ("TopK", "RoiAlign", "Range", "CumSum", "Upsample", "NonMaxSuppression", "RandomUniformLike")
_SUFFIX = {FLOAT: "_fp32", HALF: "_fp16"}


@dataclass
class _Context:
    """What every graph's conversion shares: the model's opset, the inferred element type of every
    tensor (bodies included), the requests, and the names taken anywhere in the model."""

    opset: int
    types: dict[str, int]
    keep: dict[str, str]
    keep_io: bool
    block_ops: set[str]
    taken: set[str]
    changes: list[NodeChange] = field(default_factory=list)  # nodes run in float16, Casts added
    edits: int = 0  # other edits: weights, types, attributes, output names, node order


@dataclass
class Fp16Result(PassResult):
    """`to_float16`'s `PassResult`, with the nodes kept in float32 and why."""

    kept: dict[str, str] = field(default_factory=dict)


class _Converter:
    """One graph's conversion; a body's converter has its outer graph's as `outer` (`path`: where
    the body sits, for the labels of its unnamed nodes)."""

    def __init__(self, graph: onnx.GraphProto, ctx: _Context, outer: _Converter | None = None,
                 path: str = "") -> None:
        self.graph, self.ctx, self.outer, self.path = graph, ctx, outer, path
        self.opset = ctx.opset
        self.keep_io = ctx.keep_io or outer is not None  # a body's inputs and outputs: its node's interface
        self.kept: dict[str, str] = {}
        order = topological_order(self.graph)
        self.reordered = order != list(range(len(order)))
        self.nodes = [self.graph.node[i] for i in order]
        self.labels = [self._label(self.graph.node[i], i) for i in order]
        self.type = dict(ctx.types)
        for vi in list(self.graph.input) + list(self.graph.output):  # declared: known even where inference gave up
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                self.type.setdefault(vi.name, vi.type.tensor_type.elem_type)
        self.type.update({t.name: t.data_type for t in self.graph.initializer})
        self.inputs = {i.name for i in self.graph.input}
        self.defined = self.inputs | {o for n in self.nodes for o in n.output if o}
        # Weights, including those old models (IR < 4) also list as graph inputs (overridable defaults)
        self.inits = {t.name: t for t in self.graph.initializer if t.data_type == FLOAT}
        self.const_nodes = {n.output[0]: n for n in self.nodes if n.op_type == "Constant" and n.output
                            and constant_array(n) is not None}
        for name in self.const_nodes:
            self.type[name] = FLOAT
        self.taken = ctx.taken
        self.kind: dict[str, int] = {}  # filled by the conversion
        self.holders: list[tuple[onnx.NodeProto, str]] = []  # converted nodes holding bodies, with their labels
        self.half = self._decide(ctx.keep, ctx.block_ops)

    def _label(self, node: onnx.NodeProto, index: int) -> str:
        return node_label(node, index) if self.outer is None or node.name else f"{self.path}/{node_label(node, index)}"

    # --- decisions ------------------------------------------------------------------------------
    def _decide(self, keep: dict[str, str], block_ops: set[str]) -> list[bool]:
        half = []
        for node, label in zip(self.nodes, self.labels):
            slots = node_slots(node, self.opset)
            reason = keep.get(label) or keep.get(node.name)
            if node.op_type == "Constant":
                ok = False  # weights follow their readers (see _weight_plan)
            elif has_bodies(node) and reason:
                self.kept[label] = reason  # and its bodies, whole (see run)
                ok = False
            elif slots is None or not slots.half_ok or has_bodies(node):
                ok = False
            elif any(name and name not in self.type for name in list(node.input) + list(node.output)):
                ok = False  # a tensor of unknown type (shape inference gave up): no Cast could be placed right
            elif reason:
                self.kept[label] = reason
                ok = False
            elif node.op_type in block_ops:
                self.kept[label] = f"op type {node.op_type} kept float32"
                ok = False
            else:
                ok = True
                for i, name in enumerate(node.input):
                    array = self._weight(name)
                    if array is not None and slots.input(i) == FOLLOW and finite_max(array) > FP16_MAX:
                        self.kept[label] = f"weight '{name}' reaches {finite_max(array):.3g} (float16 max 65504)"
                        ok = False
                        break
            half.append(ok)
        return half

    def _weight(self, name: str) -> np.ndarray | None:
        """A float weight this graph, or a graph around it, holds under `name` (None: not a weight)."""
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        node = self.const_nodes.get(name)
        if node is not None:
            return constant_array(node)
        return self.outer._weight(name) if self.outer is not None and not self._local(name) else None

    def _local(self, name: str) -> bool:
        return name in self.defined

    def _wanted(self, node_index: int, slot_class: str) -> int | None:
        """The precision node `node_index` needs for a float input of this class (None: any)."""
        if slot_class == FREE:
            return None
        return HALF if self.half[node_index] and slot_class == FOLLOW else FLOAT

    def _slot_classes(self, index: int, node: onnx.NodeProto) -> list[str]:
        slots = node_slots(node, self.opset)
        return [slots.input(i) if slots is not None else FIXED for i in range(len(node.input))]

    # --- rewriting ------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def run(self) -> dict[str, str]:
        """Convert this graph, then the bodies of its nodes; returns the nodes kept float32 and why."""
        self._convert()
        for node, label in self.holders:
            if self._kept_whole(node, label):
                continue
            for attr, body in bodies(node):
                self.kept.update(_Converter(body, self.ctx, self, f"{label}/{attr}").run())
        return self.kept

    def _kept_whole(self, node: onnx.NodeProto, label: str) -> bool:
        """A node holding bodies that `keep` names stays float32 with everything inside it."""
        return bool(self.ctx.keep.get(label) or self.ctx.keep.get(node.name))

    def kind_of(self, name: str) -> int | None:
        """The precision a converted tensor of this graph (or a graph around it) has under its name."""
        if name in self.kind:
            return self.kind[name]
        return self.outer.kind_of(name) if self.outer is not None else None

    def _body_wants(self) -> dict[str, set[int]]:
        """What the bodies of this graph's nodes (at any depth) want of the names they capture: the
        precision each reader needs (their decisions made as their own conversion will make them)."""
        found: dict[str, set[int]] = {}
        for i, node in enumerate(self.nodes):
            if has_bodies(node) and self._kept_whole(node, self.labels[i]):
                for name in subgraph_captures(node):  # read as they are, by float32 bodies
                    if self.type.get(name) == FLOAT:
                        found.setdefault(name, set()).add(FLOAT)
                continue
            for attr, body in bodies(node):
                inner = _Converter(body, self.ctx, self, f"{self.labels[i]}/{attr}")
                for name, want in inner.outside_wants().items():
                    found.setdefault(name, set()).update(want)
        return found

    def outside_wants(self) -> dict[str, set[int]]:
        """Precisions this body's readers (its nested bodies' included) need of the names it reads from outside."""
        local = self.defined | {t.name for t in self.graph.initializer}
        found: dict[str, set[int]] = {}
        for i, node in enumerate(self.nodes):
            for name, cls in zip(node.input, self._slot_classes(i, node)):
                if name and name not in local and self.type.get(name) == FLOAT and (
                        want := self._wanted(i, cls)) is not None:
                    found.setdefault(name, set()).add(want)
        for name, want in self._body_wants().items():
            if name not in local:
                found.setdefault(name, set()).update(want)
        for out in self.graph.output:  # a body output read straight from outside: float32, the interface
            if out.name not in local and self.type.get(out.name) == FLOAT:
                found.setdefault(out.name, set()).add(FLOAT)
        return found

    def _convert(self) -> None:
        self.ctx.edits += self.reordered
        out_type = FLOAT if self.keep_io else HALF
        required = {o.name: out_type for o in self.graph.output if self.type.get(o.name) in (FLOAT, HALF)}
        wants: dict[str, set[int]] = {}
        captured = self._body_wants()
        for name, want in captured.items():  # a weight only float16 readers in bodies read goes float16
            if name in self.inits or name in self.const_nodes:
                wants.setdefault(name, set()).update(want)
            elif self.type.get(name) == FLOAT:
                required[name] = FLOAT  # any other captured tensor keeps float32 under its name
        for i, node in enumerate(self.nodes):
            for name, cls in zip(node.input, self._slot_classes(i, node)):
                if self.type.get(name) == FLOAT and (want := self._wanted(i, cls)) is not None:
                    wants.setdefault(name, set()).add(want)
        for name, want in required.items():
            wants.setdefault(name, set()).add(want)
        kind: dict[str, int] = self.kind  # precision each float tensor has under its own name
        available: dict[tuple[str, int], str] = {}
        if self.outer is not None:  # what a body reads from outside has, under its name, its outer precision
            for name in graph_captures(self.graph):
                if (have := self.outer.kind_of(name)) is not None:
                    kind[name], available[(name, have)] = have, name
        for name in list(self.inits) + list(self.const_nodes):
            kind[name] = self._convert_weight(name, wants.get(name, set()), available)
        for vi in self.graph.input:
            if vi.name in self.inits:  # a weight listed as an input too: declared as it is stored
                self._retype(vi, kind[vi.name])
                continue
            if self.type.get(vi.name) != FLOAT:
                continue
            kind[vi.name] = FLOAT if self.keep_io else HALF
            self._retype(vi, kind[vi.name])
            available[(vi.name, kind[vi.name])] = vi.name
        emitted: list[onnx.NodeProto] = []
        for i, node in enumerate(self.nodes):
            for slot, (name, cls) in enumerate(zip(node.input, self._slot_classes(i, node))):
                want = self._wanted(i, cls)
                if name in kind and want is not None and kind[name] != want:
                    node.input[slot] = self._cast(name, kind[name], want, available, emitted)
                    self.ctx.edits += 1
            emitted.append(node)
            if self.half[i]:
                self.ctx.changes.append(NodeChange(self.labels[i], REWRITTEN, "runs in float16"))
            after = self._set_outputs(i, node, kind, required, available)
            emitted.extend(after)
        label_of = {id(node): label for node, label in zip(self.nodes, self.labels) if has_bodies(node)}
        emitted_labels = [label_of.get(id(n)) for n in emitted]
        emitted = [detached(n) for n in emitted]
        del self.graph.node[:]
        self.graph.node.extend(emitted)
        self.holders = [(n, label) for n, label in zip(self.graph.node, emitted_labels) if label is not None]
        self._retype_value_info(kind, required)

    def _convert_weight(self, name: str, wants: set[int], available: dict) -> int:
        if HALF not in wants:
            available[(name, FLOAT)] = name
            return FLOAT
        array = self._weight(name)
        half = numpy_helper.from_array(array.astype(np.float16), name)
        self.ctx.edits += 1
        if FLOAT in wants:  # read by both kinds: a float16 copy beside the float32 original
            half.name = self.fresh(name + _SUFFIX[HALF])
            self.graph.initializer.append(half)
            available[(name, FLOAT)], available[(name, HALF)] = name, half.name
            return FLOAT
        if name in self.inits:
            self.inits[name].CopyFrom(half)
        else:
            node = self.const_nodes[name]
            del node.attribute[:]
            node.attribute.append(helper.make_attribute("value", half))
        available[(name, HALF)] = name
        return HALF

    def _cast(self, name: str, have: int, want: int, available: dict, emitted: list) -> str:
        if (name, want) not in available:
            out = self.fresh(name + _SUFFIX[want])
            emitted.append(helper.make_node("Cast", [available[(name, have)]], [out], to=want,
                                            name=self.fresh(out + "_cast")))
            self.ctx.changes.append(NodeChange(emitted[-1].name, ADDED, "Cast"))
            available[(name, want)] = out
        return available[(name, want)]

    def _set_outputs(self, i: int, node: onnx.NodeProto, kind: dict, required: dict, available: dict) -> list:
        """Record the precision of the node's float outputs (renaming one whose name must keep
        another precision, with a Cast back to that name); returns the Casts to emit after it."""
        if node.op_type == "Constant" and node.output and node.output[0] in self.const_nodes:
            return []
        slots = node_slots(node, self.opset)
        if self.half[i] and node.op_type == "Cast":
            to = next(a for a in node.attribute if a.name == "to")
            if to.i == FLOAT:
                to.i, self.ctx.edits = HALF, self.ctx.edits + 1
        if self.half[i] and node.op_type == "ConstantOfShape":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == FLOAT:
                    self.ctx.edits += 1
                    attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16)))
        after = []
        for slot, name in enumerate(node.output):
            if not name or self.type.get(name) not in (FLOAT, HALF):
                continue
            cls = slots.output(slot) if slots is not None else FIXED
            has = HALF if self.half[i] and cls in (FOLLOW, ATTR) and self.type[name] == FLOAT else self.type[name]
            if name in required and required[name] != has:
                inner = self.fresh(name + _SUFFIX[has])
                node.output[slot] = inner
                available[(name, has)] = inner
                after.append(helper.make_node("Cast", [inner], [name], to=required[name],
                                              name=self.fresh(name + "_cast")))
                self.ctx.changes.append(NodeChange(after[-1].name, ADDED, "Cast"))
                kind[name] = required[name]
                available[(name, required[name])] = name
            else:
                kind[name] = has
                available[(name, has)] = name
        return after

    def _retype_value_info(self, kind: dict, required: dict) -> None:
        for vi in list(self.graph.value_info) + list(self.graph.output):
            if vi.type.HasField("tensor_type") and vi.name in kind:
                self._retype(vi, kind[vi.name])

    def _retype(self, vi: onnx.ValueInfoProto, elem_type: int) -> None:
        self.ctx.edits += vi.type.tensor_type.elem_type != elem_type
        vi.type.tensor_type.elem_type = elem_type


@checked
def to_float16(model: onnx.ModelProto, *, keep: Mapping[str, str] | None = None, keep_io_types: bool = True,
               block_ops: Iterable[str] = ()) -> Fp16Result:
    """See the module docstring."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    infos = infer_value_info(model, bodies=True)
    types = {k: v.type.tensor_type.elem_type for k, v in infos.items()
             if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}
    taken = set(types)
    for graph in [model.graph] + [body for _, _, _, body in walk_bodies(model.graph)]:
        taken.update(i.name for i in graph.input)
        taken.update(t.name for t in graph.initializer)
        taken.update(name for n in graph.node for name in [*n.output, n.name])
    ctx = _Context(opset, types, dict(keep or {}), keep_io_types, set(block_ops) | set(DEFAULT_BLOCK_OPS), taken)
    kept = _Converter(model.graph, ctx).run()
    added = any(c.action == ADDED for c in ctx.changes)
    return Fp16Result(model, changed=added or ctx.edits > 0, changes=ctx.changes, kept=kept)
