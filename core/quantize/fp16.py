"""Float32 -> float16 conversion that keeps in float32 what float16 cannot hold.

Why our own converter: ONNX Runtime's `float16.convert_float_to_float16` (from onnxconverter-common)
converts the values of every Constant node, even for the nodes it keeps in float (a
BatchNormalization variance of 9.8e7 held in a Constant became 65504: cosine 0.004 on PP-OCR's
text detector), round-trips every edge between two float32 nodes through float16, and appends the
Casts of the graph inputs after their consumers (the file fails `onnx.checker`).

Contract: `to_float16(model, keep=..., keep_io_types=..., block_ops=...)` converts `model` (a
ModelProto with its weights loaded) in place and returns the nodes kept in float32 with why
(`{node label: reason}`; a label is the node's name, or `OpType#index` for an unnamed node):
- a node runs in float16 when it is a standard ONNX op whose schema allows float16 where it
  carries its float type (fp16_slots.py), has no sub-graph, is not in `keep` (label -> reason, e.g.
  activations beyond float16's range measured by fp16_ranges.py) and not of a type in `block_ops`;
  a node reading a weight beyond float16's range (|x| > 65504) stays float32 too;
- weights (initializers and Constant nodes) become float16 only when every node reading them runs
  in float16; read by both kinds, a float16 copy is added; otherwise they are left bit-exact;
- every other tensor keeps its producer's precision; a consumer wanting the other one reads it
  through one shared Cast, emitted just before that consumer (the node list is topologically
  sorted first if it was not), so the result passes `onnx.checker`;
- graph inputs and outputs stay float32 with `keep_io_types` (else become float16); names that
  sub-graphs capture keep float32 (their bodies are not converted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.graph.index import infer_value_info
from onnxport.core.graph.runnable import topological_order as graph_topological_order
from onnxport.core.graph.uses import has_bodies, subgraph_captures
from onnxport.core.quantize.fp16_slots import ATTR, FIXED, FOLLOW, FREE, node_slots

FLOAT, HALF = TensorProto.FLOAT, TensorProto.FLOAT16
# Standard ops ONNX Runtime's converter keeps float32 by default (no float16 kernel, or a precision need).
DEFAULT_BLOCK_OPS = ("TopK", "RoiAlign", "Range", "CumSum", "Upsample", "NonMaxSuppression", "RandomUniformLike")
FP16_MAX = float(np.finfo(np.float16).max)
_SUFFIX = {FLOAT: "_fp32", HALF: "_fp16"}


def node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def topological_order(graph: onnx.GraphProto) -> list[int]:
    """Node indices in an order where each node comes after the producers of what it reads
    (sub-graph captures included); the given order when it already is one."""
    nodes = list(graph.node)
    order = graph_topological_order(nodes)
    placed = set(order)
    return order + [i for i in range(len(nodes)) if i not in placed]  # a cycle: left for the checks to refuse


def _constant_array(node: onnx.NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def _finite_max(array: np.ndarray) -> float:
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


class _Converter:
    def __init__(self, model: onnx.ModelProto, keep: Mapping[str, str], keep_io_types: bool,
                 block_ops: Iterable[str]) -> None:
        self.model, self.graph = model, model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.keep_io = keep_io_types
        self.kept: dict[str, str] = {}
        order = topological_order(self.graph)
        self.nodes = [self.graph.node[i] for i in order]
        self.labels = [node_label(self.graph.node[i], i) for i in order]
        infos = infer_value_info(model)
        self.type = {k: v.type.tensor_type.elem_type for k, v in infos.items() if v.type.HasField("tensor_type")}
        self.type.update({t.name: t.data_type for t in self.graph.initializer})
        self.inputs = {i.name for i in self.graph.input}
        # Weights, including those old models (IR < 4) also list as graph inputs (overridable defaults)
        self.inits = {t.name: t for t in self.graph.initializer if t.data_type == FLOAT}
        self.const_nodes = {n.output[0]: n for n in self.nodes if n.op_type == "Constant" and n.output
                            and _constant_array(n) is not None}
        for name in self.const_nodes:
            self.type[name] = FLOAT
        self.taken = {o for n in self.nodes for o in n.output} | self.inputs | set(self.type) | {
            n.name for n in self.nodes}
        self.half = self._decide(dict(keep), set(block_ops))

    # --- decisions ------------------------------------------------------------------------------
    def _decide(self, keep: dict[str, str], block_ops: set[str]) -> list[bool]:
        half = []
        for node, label in zip(self.nodes, self.labels):
            slots = node_slots(node, self.opset)
            reason = keep.get(label) or keep.get(node.name)
            if node.op_type == "Constant":
                ok = False  # weights follow their readers (see _weight_plan)
            elif slots is None or not slots.half_ok or has_bodies(node):
                ok = False
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
                    if array is not None and slots.input(i) == FOLLOW and _finite_max(array) > FP16_MAX:
                        self.kept[label] = f"weight '{name}' reaches {_finite_max(array):.3g} (float16 max 65504)"
                        ok = False
                        break
            half.append(ok)
        return half

    def _weight(self, name: str) -> np.ndarray | None:
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        node = self.const_nodes.get(name)
        return _constant_array(node) if node is not None else None

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
        out_type = FLOAT if self.keep_io else HALF
        required = {o.name: out_type for o in self.graph.output if self.type.get(o.name) in (FLOAT, HALF)}
        for node in self.nodes:
            if has_bodies(node):
                required.update({c: FLOAT for c in subgraph_captures(node) if self.type.get(c) == FLOAT})
        wants: dict[str, set[int]] = {}
        for i, node in enumerate(self.nodes):
            for name, cls in zip(node.input, self._slot_classes(i, node)):
                if self.type.get(name) == FLOAT and (want := self._wanted(i, cls)) is not None:
                    wants.setdefault(name, set()).add(want)
        for name, want in required.items():
            wants.setdefault(name, set()).add(want)
        kind: dict[str, int] = {}  # precision each float tensor has under its own name
        available: dict[tuple[str, int], str] = {}
        for name in list(self.inits) + list(self.const_nodes):
            kind[name] = self._convert_weight(name, wants.get(name, set()), available)
        for vi in self.graph.input:
            if vi.name in self.inits:  # a weight listed as an input too: declared as it is stored
                vi.type.tensor_type.elem_type = kind[vi.name]
                continue
            if self.type.get(vi.name) != FLOAT:
                continue
            kind[vi.name] = FLOAT if self.keep_io else HALF
            vi.type.tensor_type.elem_type = kind[vi.name]
            available[(vi.name, kind[vi.name])] = vi.name
        emitted: list[onnx.NodeProto] = []
        for i, node in enumerate(self.nodes):
            for slot, (name, cls) in enumerate(zip(node.input, self._slot_classes(i, node))):
                want = self._wanted(i, cls)
                if name in kind and want is not None and kind[name] != want:
                    node.input[slot] = self._cast(name, kind[name], want, available, emitted)
            emitted.append(node)
            after = self._set_outputs(i, node, kind, required, available)
            emitted.extend(after)
        emitted = [_detached(n) for n in emitted]
        del self.graph.node[:]
        self.graph.node.extend(emitted)
        self._retype_value_info(kind, required)
        return self.kept

    def _convert_weight(self, name: str, wants: set[int], available: dict) -> int:
        if HALF not in wants:
            available[(name, FLOAT)] = name
            return FLOAT
        array = self._weight(name)
        half = numpy_helper.from_array(array.astype(np.float16), name)
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
                to.i = HALF
        if self.half[i] and node.op_type == "ConstantOfShape":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == FLOAT:
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
                kind[name] = required[name]
                available[(name, required[name])] = name
            else:
                kind[name] = has
                available[(name, has)] = name
        return after

    def _retype_value_info(self, kind: dict, required: dict) -> None:
        for vi in list(self.graph.value_info) + list(self.graph.output):
            if vi.type.HasField("tensor_type") and vi.name in kind:
                vi.type.tensor_type.elem_type = kind[vi.name]


def _detached(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy of a node that outlives `del graph.node[:]` (protobuf clears the originals' fields)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy


def to_float16(model: onnx.ModelProto, *, keep: Mapping[str, str] | None = None, keep_io_types: bool = True,
               block_ops: Iterable[str] = ()) -> dict[str, str]:
    """See the module docstring."""
    return _Converter(model, keep or {}, keep_io_types, set(block_ops) | set(DEFAULT_BLOCK_OPS)).run()
