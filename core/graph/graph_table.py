"""A graph's nodes read once into plain Python lists, and the prune plan computed on them.

Why: every access to a protobuf field (`node.output`, `node.input`, `node.name`) costs a wrapper
object and a C call; a 100,000-node graph read field by field by the index, then again by
`plan_prune` on every change of the checked outputs, spent most of its time there. `GraphTable.read(graph)` reads each node once (name, op, what it uses - captures
of If/Loop/Scan bodies included, see `uses` - and outputs); the index keeps the table, and
`plan_prune_table` answers the same question as `prune.plan_prune` from it in plain dict/list
work that checks `cancel` as it goes. One planner (`prune.plan_from`), two readers of the graph:
this table, read once by an opened model's session and planned on for every selection, and
`plan_prune`'s walk of the protobuf for a one-shot query that must leave the model as it is.

Contract: the table describes the graph as it was read (the session holds both); `read` names
unnamed nodes `<op>_<position>` in the graph itself (the index's convention).
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from onnxport.core.graph.prune import CHECK_EVERY, PrunePlan, check_outputs, check_starts, plan_from
from onnxport.core.graph.uses import BODY_OPS, has_bodies, subgraph_captures
from onnxport.core.util.progress import CancelToken

_STANDARD = ("", "ai.onnx")


class GraphTable:
    """The nodes of one graph as parallel lists (index = position in `graph.node`)."""

    __slots__ = ("names", "ops", "uses", "outputs", "producer", "input_names", "initializer_names",
                 "with_bodies")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ops: list[str] = []
        self.uses: list[list[str]] = []  # non-empty inputs, then sorted body captures
        self.outputs: list[list[str]] = []  # as declared (may hold "" for an unused optional output)
        self.producer: dict[str, int] = {}  # tensor -> index of the node making it
        self.input_names: list[str] = []
        self.initializer_names: list[str] = []
        self.with_bodies = False  # some node holds an If/Loop/Scan body

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def read(cls, graph: onnx.GraphProto, cancel: CancelToken | None = None) -> GraphTable:
        """Read `graph` once (see the module docstring)."""
        table = cls()
        names, ops, uses, outputs, producer = table.names, table.ops, table.uses, table.outputs, table.producer
        for i, node in enumerate(graph.node):
            if cancel is not None and not i % CHECK_EVERY:
                cancel.check()
            name, op = node.name, node.op_type
            if not name:
                name = node.name = f"{op}_{i}"
            ins = node.input[:]
            if "" in ins:
                ins = [n for n in ins if n]
            if (op in BODY_OPS or node.domain not in _STANDARD) and has_bodies(node):
                table.with_bodies = True
                captured = subgraph_captures(node)
                if captured:
                    ins += sorted(captured)
            outs = node.output[:]
            for out in outs:
                if out:
                    producer[out] = i
            names.append(name)
            ops.append(op)
            uses.append(ins)
            outputs.append(outs)
        table.input_names = [vi.name for vi in graph.input]
        table.initializer_names = [t.name for t in graph.initializer]
        return table


def plan_prune_table(model: onnx.ModelProto, table: GraphTable, outputs: Iterable[str],
                     parameter_names: Iterable[str] = (), cancel: CancelToken | None = None,
                     starts: Iterable[str] = ()) -> PrunePlan:
    """`prune.plan_prune(model, outputs, parameter_names, starts)` computed from `table` (read from
    `model.graph`); the same plan, checking `cancel` every few thousand nodes. Bad names raise
    what `plan_prune` raises (`check_outputs` on the model gives the message)."""
    wanted = _checked_outputs(model, table, outputs)
    uses, names = table.uses, table.names
    return plan_from(wanted, table.producer, uses.__getitem__, table.input_names, table.initializer_names,
                     parameter_names, len(table), cancel, check_starts(model, starts, table.producer),
                     names.__getitem__)


def _checked_outputs(model: onnx.ModelProto, table: GraphTable, outputs: Iterable[str]) -> list[str]:
    """`check_outputs` on the table; any doubt (unknown, repeated, none) goes to `check_outputs`
    itself, which raises the one-line error with suggestions."""
    outputs = list(outputs)
    inputs = set(table.input_names)
    wanted: dict[str, None] = {}  # ordered, and `in` is a hash lookup: 200,000 outputs took minutes
    for raw in outputs:
        name = raw.strip()
        if not name:
            continue
        if name in wanted or (name not in table.producer and name not in inputs):
            return check_outputs(model, outputs)
        wanted[name] = None
    return list(wanted) or check_outputs(model, outputs)
