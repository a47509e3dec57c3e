"""Rename a graph's inputs and outputs (`--rename old=new`): the ends a user feeds and reads.

Contract: `rename_ends(model, renames)` is a pass (see `passes`): in place, each `old` that names a
graph input or output becomes `new` everywhere the main graph and its If/Loop/Scan bodies refer
to it (node inputs and outputs, value_info, what bodies read from outside); nodes whose inputs or
outputs change are REWRITTEN. Refused in one line before anything changes (`OnnxportError`): an
`old` that is not an input or output of the graph, a `new` already naming a tensor, two names
renamed to one. A body defining a tensor of the old name for itself is refused too (it would
shadow the renamed one). A rename already done (`new` is an end, `old` is gone) is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import onnx

from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult, node_label
from onnxport.core.graph.uses import bodies
from onnxport.core.util.errors import OnnxportError


def parse_renames(values: list[str]) -> dict[str, str]:
    """`["a=x", "b=y,c=z"]` -> {'a': 'x', 'b': 'y', 'c': 'z'}; a malformed pair is refused in one line."""
    renames: dict[str, str] = {}
    for value in values:
        for pair in value.split(","):
            if not pair.strip():
                continue
            old, sep, new = pair.partition("=")
            if not sep or not old.strip() or not new.strip():
                raise OnnxportError(f"--rename '{pair}': write it as OLD=NEW")
            renames[old.strip()] = new.strip()
    return renames


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for _, body in bodies(node):
            yield from _graphs(body)


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name the graph and its bodies declare, make or read."""
    names: set[str] = set()
    for g in _graphs(graph):
        names.update(vi.name for vi in [*g.input, *g.output, *g.value_info])
        names.update(t.name for t in g.initializer)
        for node in g.node:
            names.update(n for n in [*node.input, *node.output] if n)
    return names


def check_renames(model: onnx.ModelProto, renames: Mapping[str, str]) -> None:
    """Refuse what `rename_ends` cannot do (see the module docstring), naming the name."""
    graph = model.graph
    ends = {vi.name for vi in [*graph.input, *graph.output]}
    names = _names(graph)
    for old, new in renames.items():
        if old not in ends:
            raise OnnxportError(f"--rename {old}={new}: '{old}' is not an input or output of the exported model",
                                hint="ends: " + ", ".join(sorted(ends))[:200])
        if new != old and new in names:
            raise OnnxportError(f"--rename {old}={new}: the model already has a tensor named '{new}'")
    news = list(renames.values())
    twice = sorted({n for n in news if news.count(n) > 1})
    if twice:
        raise OnnxportError(f"--rename: two names renamed to '{twice[0]}'")
    for node in graph.node:
        for _, body in bodies(node):
            local = {o for g in _graphs(body) for n in g.node for o in n.output} | {vi.name for vi in body.input}
            clash = sorted(local & set(renames))
            if clash:
                raise OnnxportError(f"--rename: '{clash[0]}' is also defined inside '{node_label(node)}'")


def rename_ends(model: onnx.ModelProto, renames: Mapping[str, str]) -> PassResult:
    """Rename the graph's inputs and outputs, in place. See the module docstring."""
    ends = {vi.name for vi in [*model.graph.input, *model.graph.output]}
    renames = {old: new for old, new in renames.items()
               if old != new and not (old not in ends and new in ends)}  # done already: nothing to do
    check_renames(model, renames)
    if not renames:
        return PassResult(model)
    changes: list[NodeChange] = []
    for g in _graphs(model.graph):
        for vi in [*g.input, *g.output, *g.value_info]:
            if g is model.graph and vi.name in renames:
                vi.name = renames[vi.name]
        for node in g.node:
            touched = False
            for field in (node.input, node.output):
                for i, name in enumerate(field):
                    if name in renames:
                        field[i] = renames[name]
                        touched = True
            if touched:
                changes.append(NodeChange(node_label(node), REWRITTEN, "an input or output renamed"))
    notes = [f"'{old}' renamed '{new}'" for old, new in renames.items()]
    return PassResult(model, changed=True, changes=changes, notes=notes)
