"""The focused preview: a big graph's neighbourhood of the selection, small enough for Netron.

Why: Netron's layout is superlinear and hangs on LLM graphs (figures: docs/performance.md). A
graph whose preview would draw more than `FOCUS_BUDGET` nodes is drawn focused on its *seeds*
(the selected outputs, or the tensor selected in the tree): their upstream cone,
1. with repeated blocks collapsed (`focus_blocks`: the middle of a run of identical layers or
   heads becomes one `onnxport`-domain node saying what it stands for), outer runs first;
2. then, if still over budget, cut after the `hops` whole levels that fit; tensors entering from
   the cut-off part become graph inputs, named as they are.
The result is that small graph made weightless (`weightless.to_weightless`): valid ONNX, node
names as in the source. "Show more" is the same call with twice the budget.
`FocusGraph(model)` reads the graph once and answers many `focus` calls (each a `FocusedPreview`);
it never modifies the model but for naming unnamed nodes as the index does. No Qt; `cancel`
checked as it goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import onnx

from onnxport.core.graph.focus_blocks import CollapsedRun, find_runs, placeholder_node, scope_table
from onnxport.core.graph.focus_units import ContractedCone
from onnxport.core.graph.graph_table import GraphTable
from onnxport.core.graph.prune import check_outputs
from onnxport.core.graph.weightless import to_weightless
from onnxport.core.util.progress import CancelToken

FOCUS_BUDGET = 240  # drawn nodes: Netron's layout time grows superlinearly (docs/performance.md)
FOCUS_DOMAIN = "onnxport"
CHECK_EVERY = 4096


@dataclass
class FocusedPreview:
    """What `FocusGraph.focus` drew, and what it left out."""

    model: onnx.ModelProto  # the preview to draw
    seeds: list[str]
    budget: int
    total_nodes: int  # nodes the whole preview would draw (the pruned graph, or the whole one)
    shown_nodes: int  # source nodes drawn (placeholders not counted)
    hops: int | None  # levels kept when cut; None: not cut
    collapsed: list[CollapsedRun] = field(default_factory=list)
    cut_inputs: list[str] = field(default_factory=list)  # tensors entering from the part cut off
    shown_names: frozenset[str] = frozenset()  # source node names drawn
    cone_names: frozenset[str] = frozenset()  # node names the whole preview would draw

    @property
    def complete(self) -> bool:
        """Nothing left out: the whole preview."""
        return self.shown_nodes >= self.total_nodes

    def summary(self) -> str:
        """One line for the panel: what is shown, around what, and what was left out."""
        around = ", ".join(self.seeds[:2]) + (f" and {len(self.seeds) - 2} more" if len(self.seeds) > 2 else "")
        text = f"showing {self.shown_nodes:,} of {self.total_nodes:,} nodes around {around}"
        if self.collapsed:
            labels = ", ".join(r.label for r in self.collapsed[:2]) + (", …" if len(self.collapsed) > 2 else "")
            blocks = sum(r.blocks for r in self.collapsed)
            text += f"; {blocks:,} repeated blocks collapsed ({labels})"
        if self.hops is not None:
            text += f"; cut {self.hops} hops up ({len(self.cut_inputs):,} tensors enter from outside)"
        return text


class FocusGraph:
    """One model's graph read for focused previews (see the module docstring)."""

    def __init__(self, model: onnx.ModelProto, table: GraphTable | None = None,
                 cancel: CancelToken | None = None, weights: Sequence[onnx.TensorProto] = ()) -> None:
        """`weights`: headers of weights `model` holds apart from its initializers (a selection's
        constants, `export.selection_graph`): drawn as its initializers are, `model` not copied
        (the table is then read here: it lists them among the initializers)."""
        if weights and table is not None:
            raise ValueError("FocusGraph: weights held apart are given with no table")
        self.model = model
        self.table = table if table is not None else GraphTable.read(model.graph, cancel)  # `table`: read from `model`
        self._weights = list(weights)
        if self._weights:
            self.table.initializer_names = self.table.initializer_names + [t.name for t in self._weights]
        # the positions of the nodes each node reads: node i's are flat[starts[i]:starts[i + 1]] (two
        # lists of ints, not a list per node: long-lived lists per node make gen-2 GC passes long)
        self._parents: tuple[list[int], list[int]] | None = None
        self._scopes: list[list[tuple[str, int]]] | None = None  # per node: its numbered scopes
        self._initializers: dict[str, onnx.TensorProto] | None = None
        self._value_infos: dict[str, onnx.ValueInfoProto] | None = None

    def __len__(self) -> int:
        return len(self.table)

    # --- the cone ------------------------------------------------------------------------------
    def upstream(self, tensors: Iterable[str], cancel: CancelToken | None = None) -> set[int]:
        """Positions of the nodes `tensors` need (their producers, transitively)."""
        producer = self.table.producer
        flat, starts = self._parent_lists(cancel)
        kept: set[int] = set()
        stack = [producer[t] for t in tensors if t in producer]
        while stack:
            i = stack.pop()
            if i in kept:
                continue
            kept.add(i)
            if cancel is not None and not len(kept) % CHECK_EVERY:
                cancel.check()
            stack.extend(flat[starts[i]:starts[i + 1]])
        return kept

    def drawn(self, nodes: Iterable[int]) -> int:
        """Nodes Netron draws of `nodes` (positions): a Constant is drawn inside the node reading it."""
        ops = self.table.ops
        return sum(1 for i in nodes if ops[i] != "Constant")

    def _parent_lists(self, cancel: CancelToken | None) -> tuple[list[int], list[int]]:
        if self._parents is None:
            producer = self.table.producer
            flat: list[int] = []
            starts = [0]
            for i, uses in enumerate(self.table.uses):
                if cancel is not None and not i % CHECK_EVERY:
                    cancel.check()
                flat.extend([producer[t] for t in uses if t in producer])
                starts.append(len(flat))
            self._parents = (flat, starts)
        return self._parents

    def cone(self, outputs: list[str] | None, cancel: CancelToken | None = None) -> set[int]:
        """The nodes the whole preview draws: what `outputs` need, or every node (None)."""
        if outputs is None:
            return set(range(len(self.table)))
        return self.upstream(self._checked(outputs), cancel=cancel)

    def _checked(self, outputs: list[str]) -> list[str]:
        known = self.table.producer
        inputs = set(self.table.input_names)
        wanted = [o.strip() for o in outputs if o.strip()]
        if not wanted or len(set(wanted)) != len(wanted) or any(o not in known and o not in inputs for o in wanted):
            return check_outputs(self.model, outputs)  # raises the one-line error with suggestions
        return wanted

    # --- focusing -------------------------------------------------------------------------------
    def focus(self, outputs: list[str] | None, parameter_names: Iterable[str] = (), seeds: list[str] | None = None,
              budget: int = FOCUS_BUDGET, cancel: CancelToken | None = None) -> FocusedPreview:
        """The focused drawing of what `outputs` need (None: of the whole graph) around `seeds`
        (tensors; default: the outputs, or the graph's outputs) with at most about `budget` nodes.
        `parameter_names`: graph inputs that hold weights (collapsed blocks count them as such)."""
        table = self.table
        cone = self.cone(outputs, cancel)
        ends = self._checked(outputs) if outputs is not None else [o.name for o in self.model.graph.output]
        params = set(parameter_names)
        if self.drawn(cone) <= budget:  # the whole preview fits: drawn whole, the selection is only selected
            seeds, kept, units, runs, hops = ends, sorted(cone), None, [], None
        else:
            seeds = [s for s in seeds or () if table.producer.get(s) in cone] or ends
            up = cone if outputs is not None and seeds == ends else self.upstream(seeds, cancel)
            kept, units, runs, hops = self._choose(seeds, up, budget, params, cancel)
        model = self._extract(kept, units, seeds)
        shown = frozenset(n.name for n in model.graph.node if n.domain != FOCUS_DOMAIN)
        graph_inputs = set(table.input_names)
        cut = [i.name for i in model.graph.input if i.name not in graph_inputs]
        names = table.names
        return FocusedPreview(model, list(seeds), budget, len(cone), len(shown), hops, runs, cut, shown,
                              frozenset(names[i] for i in cone))

    def _choose(self, seeds: list[str], up: set[int], budget: int, params: set[str],
                cancel: CancelToken | None) -> tuple[list[int], ContractedCone, list[CollapsedRun], int | None]:
        """Kept units in topological order (node positions; -1 - k for the k-th run's placeholder),
        the units, the runs drawn collapsed and the hops kept (None: not cut). Collapses as little
        as fits; cuts only if even the deepest collapse does not fit."""
        table = self.table
        protected = {table.producer[s] for s in seeds if s in table.producer}
        size = self.drawn(up)
        if size > budget and self._scopes is None:
            self._scopes = scope_table(table.names)
        all_runs = find_runs(self._scopes, table.ops, up, protected) if size > budget else []
        choice: list[CollapsedRun] = []
        for depth in [-1] + sorted({r.depth for r in all_runs}):
            choice = [r for r in all_runs if r.depth <= depth]
            if size - sum(self.drawn(r.nodes) for r in choice) + len(choice) <= budget:
                break
        choice = self._expand(choice, size, budget)
        if cancel is not None:
            cancel.check()
        weights = set(table.initializer_names) | params
        units = ContractedCone(table, up, choice, weights)
        kept, hops = units.levels(seeds, budget)
        order = units.topological(kept)
        if order is None:  # collapsing made a cycle (a block feeds an outside node feeding a later block)
            units = ContractedCone(table, up, [], weights)
            kept, hops = units.levels(seeds, budget)
            order = sorted(kept)
        drawn = set(order)
        return order, units, [r for k, r in enumerate(units.runs) if -1 - k in drawn], hops

    def _expand(self, choice: list[CollapsedRun], size: int, budget: int) -> list[CollapsedRun]:
        """With room left in `budget`, the deepest collapsed runs nearest the seeds (latest in the
        graph) drawn again, block by block from their end, while they fit: "Show more" grows the
        view gradually."""
        now = size - sum(self.drawn(r.nodes) for r in choice) + len(choice)
        if not choice or now > budget:
            return choice
        deepest = max(r.depth for r in choice)
        kept = list(choice)
        for run in sorted((r for r in choice if r.depth == deepest), key=lambda r: -r.nodes[-1]):
            per_block = self.drawn(run.block_nodes[-1]) if run.block_nodes else 0  # identical blocks
            if per_block * run.blocks - 1 <= budget - now:
                kept.remove(run)
                now += per_block * run.blocks - 1
            elif per_block and budget - now >= per_block:
                drawn_again = (budget - now) // per_block
                kept[kept.index(run)] = run.first_blocks(run.blocks - drawn_again)
                now += drawn_again * per_block
        return kept

    def _extract(self, kept: list[int], units: ContractedCone | None, seeds: list[str]) -> onnx.ModelProto:
        """The small model of the kept units, weightless."""
        source, table = self.model, self.table
        small = onnx.ModelProto(ir_version=source.ir_version, producer_name=source.producer_name)
        small.opset_import.extend(source.opset_import)
        small.functions.extend(source.functions)
        graph = small.graph
        graph.name = source.graph.name
        produced: set[str] = set()
        read: list[str] = []
        placeholders = {-1 - k: r for k, r in enumerate(units.runs)} if units is not None else {}
        for u in kept:
            if u >= 0:
                graph.node.append(source.graph.node[u])
                produced.update(o for o in table.outputs[u] if o)
                read.extend(table.uses[u])
            else:
                run = placeholders[u]
                ins, outs = units.inputs[u], units.outputs[u]
                graph.node.append(placeholder_node(run, ins, outs, FOCUS_DOMAIN))
                produced.update(outs)
                read.extend(ins)
        if any(u < 0 for u in kept):
            small.opset_import.append(onnx.helper.make_opsetid(FOCUS_DOMAIN, 1))
        initializers, infos = self._lookups()
        inputs, seen = [], set()
        graph_inputs = {vi.name: vi for vi in source.graph.input}
        for name in read + list(seeds):  # a seed no node makes is a graph input the user asked for
            if name in produced or name in seen:
                continue
            seen.add(name)
            if name in initializers:
                t = initializers[name]
                graph.initializer.add(name=name, data_type=t.data_type, dims=t.dims)
            else:
                inputs.append(graph_inputs.get(name) or infos.get(name) or onnx.ValueInfoProto(name=name))
        graph.input.extend(inputs)
        graph.output.extend(infos.get(s) or onnx.ValueInfoProto(name=s) for s in seeds)
        ends = set(seeds)
        graph.value_info.extend(infos[n] for n in sorted(produced) if n in infos and n not in ends)
        to_weightless(small)
        for vi in list(graph.input) + list(graph.output):
            if not vi.type.HasField("tensor_type") and vi.type.WhichOneof("value") is None:
                vi.type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED  # unknown here: said so, validly
                vi.type.tensor_type.shape.SetInParent()
        return small

    def _lookups(self) -> tuple[dict[str, onnx.TensorProto], dict[str, onnx.ValueInfoProto]]:
        if self._initializers is None:
            g = self.model.graph
            self._initializers = {t.name: t for t in list(g.initializer) + self._weights}
            self._value_infos = {vi.name: vi for vi in list(g.value_info) + list(g.output) + list(g.input)
                                 if vi.type.WhichOneof("value") is not None}
        return self._initializers, self._value_infos

