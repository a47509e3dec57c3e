"""Generators for the fuzz tests of issue 27's families: model-local functions and names.

- `local_function_models()`: a model whose graph calls model-local functions that call each other
  (any call graph: chains, fan-out, self-calls, cycles), with the verdict an independent oracle
  gives: "ok", "recursive" (a function reaches itself) or "too big" (the graph, every call
  inlined, holds more nodes than budgets.function_expansion_limit allows).
- `NAMES`: text as a stranger's file may hold it in names: markup (`<img src=...>`, entities),
  C0/C1 controls, ESC sequences, BEL, newlines, bidi overrides and separators, long runs.
- `renamed(model, names)`: a model with its tensors renamed to such names, consistently.
"""

from __future__ import annotations

import functools

import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnxport.core.util.budgets import function_expansion_limit

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
RELU = -1  # a body step that is a plain op, not a call


@st.composite
def local_function_models(draw) -> tuple[bytes, str]:
    if draw(st.booleans()):  # f_i calls f_i+1 `calls` times: sizes from a few nodes to 4^48
        n, calls = draw(st.integers(2, 48)), draw(st.integers(1, 4))
        bodies = [[i + 1] * calls for i in range(n - 1)] + [[RELU]]
    else:  # f_i calls only later functions (a DAG: its size is what multiplies)
        n = draw(st.integers(1, 12))
        bodies = [draw(st.lists(st.integers(i + 1, n - 1) | st.just(RELU) if i < n - 1 else st.just(RELU),
                                min_size=1, max_size=6)) for i in range(n)]
    # then maybe a few calls back (a cycle)
    for caller, callee in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2)):
        if callee <= caller:
            bodies[caller].insert(draw(st.integers(0, len(bodies[caller]))), callee)
    entry = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    functions = [helper.make_function("local", f"f{i}", ["a"], ["b"], _chain(body, "a", "b"), OPSETS)
                 for i, body in enumerate(bodies)]
    graph = helper.make_graph(_chain(entry, "x", "y"), "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=OPSETS, ir_version=8, functions=functions)
    return model.SerializeToString(), _verdict(bodies, entry)


def _chain(steps: list[int], first: str, last: str) -> list[onnx.NodeProto]:
    names = [first] + [f"t{k}" for k in range(len(steps) - 1)] + [last]
    return [helper.make_node("Relu", [names[k]], [names[k + 1]]) if step == RELU else
            helper.make_node(f"f{step}", [names[k]], [names[k + 1]], domain="local") for k, step in enumerate(steps)]


def _verdict(bodies: list[list[int]], entry: list[int]) -> str:
    """The oracle: plain recursion over the (small) call graph, apart from model_functions."""
    def reaches(start: int) -> bool:
        seen, todo = set(), [c for c in bodies[start] if c != RELU]
        while todo:
            f = todo.pop()
            if f == start:
                return True
            if f not in seen:
                seen.add(f)
                todo += [c for c in bodies[f] if c != RELU]
        return False

    if any(reaches(f) for f in range(len(bodies))):
        return "recursive"

    @functools.cache
    def size(f: int) -> int:
        return sum(1 if c == RELU else 1 + size(c) for c in bodies[f])

    expanded = sum(1 + size(f) for f in entry)
    stored = len(entry) + sum(len(b) for b in bodies)
    return "too big" if expanded > function_expansion_limit(stored) else "ok"


PIECES = ['<img src="/dev/zero">', "<b>bold</b>", "<a href='file:///etc/passwd'>x</a>", "&lt;&amp;", "\x1b[2J",
          "\x1b]0;title\x07", "\x1b[31m", "\x07", "\n", "\r", "\t", "\x00", "\x7f", "\x85", "\x9b", "\u202e",
          "\u2066", "\u200f", "\u2028", "\ufeff", "\u0301", "%s%n", "{0}", "\\", "/", ".", ",", "x" * 300]
NAMES = st.lists(st.one_of(st.sampled_from(PIECES), st.characters(exclude_categories=("Cs",))),
                 min_size=1, max_size=8).map("".join)


def renamed(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """`model` with its main graph's node outputs renamed to `names` (in turn; a name already
    given is made unique), everywhere they are read, including graph outputs."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    mapping: dict[str, str] = {}
    taken = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for k, out in enumerate(o for node in graph.node for o in node.output if o):
        new = names[k % len(names)]
        while new in taken or new == "":
            new += "'"
        taken.add(new)
        mapping[out] = new
    _rename(graph, mapping)
    return model


def _rename(graph: onnx.GraphProto, mapping: dict[str, str]) -> None:
    for node in graph.node:
        node.input[:] = [mapping.get(i, i) for i in node.input]
        node.output[:] = [mapping.get(o, o) for o in node.output]
        for attr in node.attribute:
            for body in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                _rename(body, mapping)  # bodies read outer tensors by name
    for vi in [*graph.output, *graph.value_info]:
        vi.name = mapping.get(vi.name, vi.name)
