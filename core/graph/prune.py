"""Prune a graph to chosen outputs, cut at chosen inputs.

Contract: `plan_prune(model, outputs, parameter_names, starts)` (a query: the model is untouched)
takes output names (graph outputs or any node output, in order) and `starts`, intermediate tensors
that become graph inputs (the walk up from the outputs stops there), and returns a `PrunePlan`
naming exactly the nodes, graph inputs (`inputs` still needed, new `cut_inputs`) and
initializers/parameters the outputs need. Unknown names raise `UnknownOutputError` with the
closest names; a start no output needs, or whose node stays for its other outputs, is refused in
one line. Sub-graphs (If/Loop/Scan) keep the outer tensors they capture (see `uses`).
`prune(model, plan)` is the pass (see `passes`) applying a plan in place: the kept nodes in graph
order (the others REMOVED), the cut inputs then the graph inputs still fed (parameter inputs go:
they become initializers when written), the planned outputs in order, each typed where a type is
known, the value_info of live tensors, and the initializers the plan keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import onnx

from onnxport.core.graph.passes import REMOVED, NodeChange, PassResult, node_label
from onnxport.core.graph.uses import node_uses, used_names
from onnxport.core.io.model_io import extend_in_slices, items_of, release
from onnxport.core.util.errors import OnnxportError, UnknownOutputError
from onnxport.core.util.progress import CancelToken
from onnxport.core.util.suggest import did_you_mean

CHECK_EVERY = 4096  # nodes between two cancel checks


@dataclass
class PrunePlan:
    outputs: list[str]
    node_indices: list[int]  # kept nodes, in graph order
    inputs: list[str]  # graph inputs the user still feeds
    initializers: list[str]  # graph initializers still needed
    parameter_inputs: list[str]  # graph inputs that parameters fill (become initializers)
    dropped_inputs: list[str] = field(default_factory=list)
    total_nodes: int = 0
    cut_inputs: list[str] = field(default_factory=list)  # intermediate tensors made graph inputs (`starts`)

    @property
    def dropped_nodes(self) -> int:
        return self.total_nodes - len(self.node_indices)


def check_outputs(model: onnx.ModelProto, outputs: Iterable[str]) -> list[str]:
    """Validate output names (unique, known tensors); raise `UnknownOutputError` with suggestions."""
    graph = model.graph
    produced = {o for n in graph.node for o in n.output if o}
    known = produced | {i.name for i in graph.input}
    result: list[str] = []
    for name in outputs:
        name = name.strip()
        if not name:
            continue
        if name in result:
            raise UnknownOutputError(f"output '{name}' is listed twice")
        if name not in known:
            guess = did_you_mean(name, produced)  # in the message: the API's exception text says it too
            raise UnknownOutputError(f"unknown output '{name}': no tensor of that name in the graph"
                                     + (f"; {guess}" if guess else ""),
                                     hint=None if guess else "run 'onnxport inspect MODEL' to list the tensors")
        result.append(name)
    if not result:
        raise UnknownOutputError("no outputs chosen", hint="name at least one tensor to keep")
    return result


def plan_prune(model: onnx.ModelProto, outputs: Iterable[str], parameter_names: Iterable[str] = (),
               starts: Iterable[str] = ()) -> PrunePlan:
    """Which nodes, inputs and initializers the chosen outputs need (cut at `starts`)."""
    graph = model.graph
    wanted = check_outputs(model, outputs)
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if out:
                producer[out] = i
    return plan_from(wanted, producer, lambda idx: node_uses(graph.node[idx]), [vi.name for vi in graph.input],
                     [t.name for t in graph.initializer], parameter_names, len(graph.node),
                     starts=check_starts(model, starts, producer), node_name=lambda idx: graph.node[idx].name)


def check_starts(model: onnx.ModelProto, starts: Iterable[str], producer: Mapping[str, int]) -> list[str]:
    """Validate the tensors to start from (made by a node, or a graph input); an unknown one
    raises `UnknownOutputError` naming the closest names. Repeats are said once."""
    inputs = {vi.name for vi in model.graph.input}
    result: list[str] = []
    for raw in starts:
        name = raw.strip()
        if not name or name in result:
            continue
        if name not in producer and name not in inputs:
            guess = did_you_mean(name, list(producer))
            raise UnknownOutputError(f"unknown tensor '{name}' to start from: no node makes it"
                                     + (f"; {guess}" if guess else ""),
                                     hint=None if guess else "run 'onnxport inspect MODEL' to list the tensors")
        result.append(name)
    return result


def plan_from(wanted: list[str], producer: Mapping[str, int], uses: Callable[[int], Iterable[str]],
              input_names: Sequence[str], initializer_names: Sequence[str], parameter_names: Iterable[str],
              total_nodes: int, cancel: CancelToken | None = None, starts: Sequence[str] = (),
              node_name: Callable[[int], str] = str) -> PrunePlan:
    """The plan for checked outputs `wanted`, from a graph read any way: `producer` (tensor -> node
    index), `uses(index)` (what that node reads, body captures included), the graph's input and
    initializer names. The upstream cone is walked once, stopping at the checked `starts`;
    `cancel` is checked every CHECK_EVERY nodes. `node_name(index)` names a node in a refusal."""
    stop = set(starts)
    needed_names: set[str] = set()
    kept: set[int] = set()
    stack = list(wanted)
    while stack:
        name = stack.pop()
        if name in needed_names:
            continue
        needed_names.add(name)
        idx = None if name in stop else producer.get(name)
        if idx is None or idx in kept:
            continue
        kept.add(idx)
        stack.extend(uses(idx))
        if cancel is not None and not len(kept) % CHECK_EVERY:
            cancel.check()
    cut = _cut_inputs(starts, needed_names, kept, producer, set(input_names), node_name,
                      lambda: _upstream(wanted, producer, uses))
    params = set(parameter_names)
    initializer_set = set(initializer_names)
    inputs, param_inputs, dropped = [], [], []
    for name in input_names:
        if name in initializer_set:
            continue
        if name in params:
            if name in needed_names:
                param_inputs.append(name)
        elif name in needed_names:
            inputs.append(name)
        else:
            dropped.append(name)
    return PrunePlan(outputs=wanted, node_indices=sorted(kept), inputs=inputs,
                     initializers=[n for n in initializer_names if n in needed_names],
                     parameter_inputs=param_inputs, dropped_inputs=dropped, total_nodes=total_nodes, cut_inputs=cut)


def _upstream(wanted: Iterable[str], producer: Mapping[str, int], uses: Callable[[int], Iterable[str]]) -> set[str]:
    """Every tensor the outputs `wanted` depend on in the whole graph (no cut): for a refusal's words."""
    seen: set[str] = set()
    stack, walked = list(wanted), set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        idx = producer.get(name)
        if idx is not None and idx not in walked:
            walked.add(idx)
            stack.extend(uses(idx))
    return seen


def _cut_inputs(starts: Sequence[str], needed: set[str], kept: set[int], producer: Mapping[str, int],
                inputs: set[str], node_name: Callable[[int], str], upstream: Callable[[], set[str]]) -> list[str]:
    """The starts that become graph inputs; refuses one no output needs, or whose node stays.
    `upstream()`: what the outputs need uncut (a start another start cuts off is said so)."""
    for name in starts:
        if name not in needed:
            others = [s for s in starts if s != name and s in needed]
            if others and name in upstream():
                raise OnnxportError(f"cannot start from '{name}': the cut at {', '.join(others)} already leaves it "
                                    "out (no chosen output depends on it past there)", hint=f"drop '{name}' from the starts")
            raise OnnxportError(f"cannot start from '{name}': no chosen output depends on it",
                                hint="start from a tensor upstream of the outputs")
        idx = producer.get(name)
        if idx is not None and idx in kept:
            raise OnnxportError(f"cannot start from '{name}': its node '{node_name(idx)}' is still needed "
                                "for its other outputs", hint="start from those outputs too")
    return [n for n in starts if n not in inputs]


def prune(model: onnx.ModelProto, plan: PrunePlan,
          value_info: dict[str, onnx.ValueInfoProto] | None = None) -> PassResult:
    """Keep only what `plan` needs, in place (a pass: see `passes`). See the module docstring.

    `plan` is `plan_prune` of this model or of a copy with the same nodes (the export plans on
    the source and prunes a weight-free copy). `value_info` (from shape inference) types outputs
    that were intermediate tensors.
    """
    graph = model.graph
    if plan.total_nodes != len(graph.node):
        raise ValueError(f"the prune plan is for a graph of {plan.total_nodes} nodes, not {len(graph.node)}")
    before = _signature(graph)
    kept = set(plan.node_indices)
    changes = [NodeChange(node_label(n), REMOVED, "not needed by the outputs")
               for i, n in enumerate(graph.node) if i not in kept]
    if changes:
        nodes = [graph.node[i] for i in plan.node_indices]
        del graph.node[:]
        extend_in_slices(graph.node, nodes)
    notes = [f"input '{n}' dropped: nothing kept reads it" for n in plan.dropped_inputs]
    notes += [f"input '{n}' removed: a parameter fills it" for n in plan.parameter_inputs]
    notes += [f"input '{n}' added: the graph starts there" for n in plan.cut_inputs]
    by_name = {vi.name: vi for vi in graph.input}
    known = {vi.name: vi for vi in [*items_of(graph.value_info), *items_of(graph.output)]}
    for name, vi in (value_info or {}).items():
        known.setdefault(name, vi)
    known.update(by_name)
    cut = [known[n] if n in known else onnx.ValueInfoProto(name=n) for n in plan.cut_inputs]
    inputs = cut + [by_name[n] for n in plan.inputs]
    outputs = [known[name] if name in known else onnx.ValueInfoProto(name=name) for name in plan.outputs]
    # two lookups, no union: a union of every name is one long C call (the GIL held throughout)
    used, produced = used_names(graph), {o for node in graph.node for o in node.output}
    ends = set(plan.outputs) | set(plan.cut_inputs)
    kept_vi = [vi for vi in graph.value_info if (vi.name in used or vi.name in produced) and vi.name not in ends]
    for field_, values in ((graph.input, inputs), (graph.output, outputs), (graph.value_info, kept_vi)):
        del field_[:]
        extend_in_slices(field_, values)
    needed = set(plan.initializers)
    for i in reversed(range(len(graph.initializer))):  # one by one: kept weights are never copied
        if graph.initializer[i].name not in needed:
            notes.append(f"initializer '{graph.initializer[i].name}' removed: nothing kept reads it")
            del graph.initializer[i]
    release(kept, used, produced, by_name, known, kept_vi)  # not at once at the return (model_io.release)
    return PassResult(model, changed=_signature(graph) != before, changes=changes, notes=notes)


def _signature(graph: onnx.GraphProto) -> tuple:
    """What prune can change, cheaply compared (value_info and outputs include their types)."""
    return (len(graph.node), [vi.SerializeToString() for vi in graph.input],
            [vi.SerializeToString() for vi in graph.output], [vi.SerializeToString() for vi in graph.value_info],
            [t.name for t in graph.initializer])
