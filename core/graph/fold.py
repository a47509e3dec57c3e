"""Freeze-time folding: once parameters are constants, compute the parameter-only sub-graphs.

A training-mode export leaves e.g. a `Transpose` of every Linear weight; folding them makes the
model faster and lets a quantizer see constant MatMul weights. Contract (a pass, see `passes`):
`fold_constants(model, constants)` edits `model` in place given its weights by name; each node
computed from constants only is FOLDED (its output becomes a constant), Constant nodes nothing
reads any more are REMOVED, and `result.constants` are what the remaining graph needs. Folded
outputs are `ConstTensor`s of known shape, small ones computed at once, others lazily when
written (memory stays at one tensor). Only ops whose numpy result is bit-identical to ONNX
Runtime's are folded; nodes producing graph outputs are left alone.

Bounded (`budgets`): output shapes are inferred and validated first (`fold_shapes`); a node is
folded only if its output, the model's growth and the total work stay within budget, else it
stays in the graph: folding never fails on a crafted model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.graph.const_tensors import ConstTensor
from onnxport.core.graph.fold_budget import FoldBudget, output_allowed
from onnxport.core.graph.fold_ops import FLOAT_ONLY_SAFE, FLOAT_TYPES, FOLDERS, NUMPY_EXACT, attrs_of
from onnxport.core.graph.fold_shapes import output_shape
from onnxport.core.graph.passes import FOLDED, REMOVED, NodeChange, PassResult, node_label
from onnxport.core.graph.uses import node_uses
from onnxport.core.io.model_io import extend_in_slices, items_of, release
from onnxport.core.io.parameter_set import c_contiguous, np_dtype_for
from onnxport.core.util.budgets import FOLD_OUTPUT_FLOOR, FOLD_VALUE_MAX
from onnxport.core.util.errors import CorruptFileError, OnnxportError
from onnxport.core.util.shapes import numel

T = onnx.TensorProto


@dataclass
class FoldResult(PassResult):
    """A `PassResult` plus the constants the folded model needs (the writer writes them)."""

    constants: dict[str, ConstTensor] = field(default_factory=dict)


def fold_constants(model: onnx.ModelProto, constants: dict[str, ConstTensor]) -> FoldResult:
    """Fold the nodes of `model` whose inputs are all constants, in place. See the module docstring.

    `constants`: the values of the graph's weights by name (the model's own initializers are not
    read: a model being exported holds none, the writer adds them). Graph outputs stay produced by
    nodes. `result.constants` is what the remaining graph needs: the given constants still read and
    the folded tensors; `constants` itself is not modified.
    """
    graph = model.graph
    protected = {o.name for o in graph.output}
    nodes = items_of(graph.node)
    folder = _Folder(nodes, constants, protected) if _may_fold(nodes, constants) else None
    remaining = [node for index, node in enumerate(nodes) if not folder.fold(index, node)] if folder else nodes
    # Drop what nothing uses any more (folded-away weights, Constant nodes consumed by folds);
    # names that sub-graphs (If/Loop bodies) capture from this scope count as used.
    def used_by(live: list[onnx.NodeProto]) -> set[str]:
        return {n for node in live for n in node_uses(node)} | protected

    used = used_by(remaining)
    live_nodes = [n for n in remaining if not (n.op_type == "Constant" and not (set(n.output) & used))]
    # a Constant node reads nothing: dropping those nothing reads leaves `used` as it is
    constant_node_outputs = {o for n in live_nodes if n.op_type == "Constant" for o in n.output}
    available = folder.available if folder is not None else constants
    needed = {name: c for name, c in available.items() if name in used and name not in constant_node_outputs}
    changes = list(folder.changes) if folder is not None else []
    live_ids = {id(n) for n in live_nodes}
    changes += [NodeChange(node_label(n), REMOVED, "Constant no longer read") for n in remaining
                if id(n) not in live_ids]
    if changes:
        del graph.node[:]
        extend_in_slices(graph.node, live_nodes)
    release(nodes, remaining, live_nodes, folder.consumers if folder is not None else {}, used, live_ids)  # a slice at a time
    notes = _drop_stale_value_info(graph, needed)
    return FoldResult(model, changed=bool(changes or notes), changes=changes, notes=notes, constants=needed)


def _may_fold(nodes: Sequence[onnx.NodeProto], constants: dict[str, ConstTensor]) -> bool:
    """Whether any node could fold: a standard op the folder knows whose inputs are all weights
    or Constant outputs (the first fold of any chain is one). A superset of what `_Folder` folds:
    a graph without one (a decoder's shape arithmetic reads runtime tensors) skips the folder,
    which reads every node and every Constant's header, and is left exactly as the folder leaves it."""
    known = set(constants)
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant":
            known.update(node.output)
        elif node.op_type in FOLDERS and node.input and all(not n or n in known for n in node.input):
            return True
    return False


def _drop_stale_value_info(graph: onnx.GraphProto, consts: dict[str, ConstTensor]) -> list[str]:
    """value_info for tensors that are constants now (initializers when written) or gone is not needed."""
    if not len(graph.value_info):
        return []
    live = {n for node in graph.node for n in list(node.input) + list(node.output)}
    keep = [vi for vi in graph.value_info if vi.name in live and vi.name not in consts]
    if len(keep) == len(graph.value_info):
        return []
    kept = {vi.name for vi in keep}
    notes = [f"value_info '{vi.name}' dropped: a constant now, or gone" for vi in graph.value_info
             if vi.name not in kept]
    del graph.value_info[:]
    graph.value_info.extend(keep)
    return notes


class _Folder:
    """One folding pass: the constants known so far, who consumes what, and the budget left."""

    def __init__(self, nodes: Sequence[onnx.NodeProto], consts: dict[str, ConstTensor], protected: set[str]):
        self.available = dict(consts)
        self.protected = protected
        self.changes: list[NodeChange] = []
        self.budget = FoldBudget.for_constants(sum(c.nbytes for c in consts.values()))
        self.pending: dict[str, int] = {}  # lazy folded tensor -> bytes read/computed to write it
        self.in_memory: set[str] = set()  # computed or decoded already: free to read again
        self.consumers: dict[str, set[int]] = {}
        for index, node in enumerate(nodes):
            for name in node_uses(node):
                self.consumers.setdefault(name, set()).add(index)
        self._values: dict[str, np.ndarray] = {}

    def fold(self, index: int, node: onnx.NodeProto) -> bool:
        """Fold `node` if it can be and the budget allows; True if it was (it leaves the graph)."""
        if node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type == "Constant":
            self._constant(node)
            return False  # kept; dropped at the end if nothing uses it
        if not self._foldable(node):
            return False
        ins = [self.available[n] if n else None for n in node.input]
        attrs = attrs_of(node)
        shape = output_shape(node, attrs, [c.shape if c is not None else None for c in ins],
                             lambda i: self._value(node.input[i]))
        if shape is None:
            return False
        elem_type = attrs["to"] if node.op_type == "Cast" else ins[0].elem_type
        out_bytes = numel(shape) * np_dtype_for(elem_type).itemsize
        distinct = {n: self.available[n] for n in node.input if n}
        if not output_allowed(out_bytes, sum(c.nbytes for c in distinct.values())):
            return False
        freed = [n for n in distinct if self.consumers.get(n) == {index} and n not in self.protected]
        growth = out_bytes - sum(distinct[n].nbytes for n in freed)
        cost = out_bytes + sum(self._cost(n) for n in distinct)
        work = cost - sum(self.pending.get(n, 0) for n in freed)
        if not self.budget.allows(growth, work):
            return False
        name = node.output[0]
        compute = _computer(node, attrs, ins, shape, elem_type)
        if self.budget.take_eager(out_bytes):
            try:
                array = compute()
            except OnnxportError:
                return False
            self.available[name] = ConstTensor(name, elem_type, shape, out_bytes, compute=lambda: array)
            self.in_memory.add(name)
        else:
            self.available[name] = ConstTensor(name, elem_type, shape, out_bytes, compute=compute)
            self.pending[name] = cost
        self.budget.spend(growth, work)
        self.changes.append(NodeChange(node_label(node), FOLDED, f"{node.op_type} of constants"))
        return True

    def _foldable(self, node: onnx.NodeProto) -> bool:
        if node.op_type not in FOLDERS or len(node.output) != 1 or not node.output[0]:
            return False
        if node.output[0] in self.protected or node.output[0] in self.available:
            return False
        if not node.input or not node.input[0] or any(n and n not in self.available for n in node.input):
            return False
        ins = [self.available[n] for n in node.input if n]
        if any(c.shape is None or c.elem_type in (T.STRING, T.UNDEFINED) for c in ins):
            return False
        types = {c.elem_type for c in ins}
        if node.op_type == "Cast":
            return ins[0].elem_type in NUMPY_EXACT and attrs_of(node).get("to") in NUMPY_EXACT
        if node.op_type in FLOAT_ONLY_SAFE:
            return len(types) == 1 and types <= set(FLOAT_TYPES)
        if node.op_type == "Concat":
            return len(types) == 1
        return True

    def _constant(self, node: onnx.NodeProto) -> None:
        if len(node.output) != 1 or node.output[0] in self.protected:
            return
        value = constant_node_tensor(node)  # <= FOLD_OUTPUT_FLOOR; decoded only if a fold reads it
        if value is not None:
            self.available[node.output[0]] = value
            self.in_memory.add(node.output[0])  # inline in the loaded model: free to read

    def _cost(self, name: str) -> int:
        """Bytes it takes to get `name`'s values: 0 in memory, its chain if lazy, else a read."""
        if name in self.in_memory or name in self._values:
            return 0
        return self.pending.get(name, self.available[name].nbytes)

    def _value(self, name: str) -> np.ndarray | None:
        """A small input's values (shapes, axes, indices), read at most once; None if too big."""
        if name in self._values:
            return self._values[name]
        c = self.available[name]
        cost = self._cost(name)
        if c.nbytes > FOLD_VALUE_MAX or not self.budget.allows(0, cost):
            return None
        try:
            values = np.asarray(c.values())
        except OnnxportError:
            return None
        self.budget.spend(0, cost)
        if self.budget.take_eager(values.nbytes):
            self._values[name] = values  # kept only while small; bigger ones are re-read (and paid for)
        return values



def constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    """A Constant node's `value` tensor if it is inline and small enough to fold with; else None.
    Its size is checked from its dims before it is decoded."""
    tensor = constant_node_tensor(node)
    if tensor is None:
        return None
    try:
        return tensor.values()
    except OnnxportError:
        return None


def constant_node_tensor(node: onnx.NodeProto) -> ConstTensor | None:
    """`constant_node_value` as a ConstTensor decoded when read: a decoder graph has ~10k Constant
    nodes (shapes, axes, scalars) and folding reads few of them. Decoding data that does not fit
    the dims raises CorruptFileError (the folder then leaves the node alone)."""
    t = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
    if t is None or t.data_location == T.EXTERNAL or t.data_type in (T.STRING, T.UNDEFINED):
        return None
    try:
        shape = tuple(int(d) for d in t.dims)
        nbytes = numel(shape) * np_dtype_for(t.data_type).itemsize
    except (OnnxportError, ValueError, TypeError, KeyError):
        return None
    if nbytes > FOLD_OUTPUT_FLOOR:
        return None
    label = f"Constant node '{node.name or node.output[0]}'"

    def decode() -> np.ndarray:
        try:
            value = numpy_helper.to_array(t)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise CorruptFileError(f"{label}: its value does not decode ({exc})") from None
        if tuple(value.shape) != shape:
            raise CorruptFileError(f"{label}: its value holds {list(value.shape)}, its dims say {list(shape)}")
        return value

    return ConstTensor(node.output[0], t.data_type, shape, nbytes, compute=decode)


def _computer(node: onnx.NodeProto, attrs: dict, ins: list[ConstTensor | None], shape: tuple[int, ...],
              elem_type: int) -> Callable[[], np.ndarray]:
    """The function computing `node`'s output; checks the result against the inferred shape."""
    fn = FOLDERS[node.op_type]
    label = f"folding {node.op_type} node '{node.name or node.output[0]}'"
    want = np_dtype_for(elem_type)

    def compute() -> np.ndarray:
        got: dict[int, np.ndarray] = {}  # an input used twice (Concat of one weight) is read once
        for c in ins:
            if c is not None and id(c) not in got:
                got[id(c)] = _canonical(c)
        xs = [None if c is None else got[id(c)] for c in ins]
        try:
            out = c_contiguous(fn(node, attrs, xs))
        except (ValueError, IndexError, TypeError) as exc:
            raise CorruptFileError(f"{label} failed: {exc}") from None
        if tuple(out.shape) != tuple(shape) or out.dtype.itemsize != want.itemsize:
            raise CorruptFileError(f"{label} gave {out.dtype}{list(out.shape)}, expected {want}{list(shape)}")
        return out

    return compute


def _canonical(c: ConstTensor) -> np.ndarray:
    """`c`'s values in numpy's dtype for its ONNX type (bfloat16 read as uint16 -> bfloat16)."""
    x = np.asarray(c.values())
    want = np_dtype_for(c.elem_type)
    return x.view(want) if x.dtype != want and x.dtype.itemsize == want.itemsize else x
