"""A quantized model in which each quantized node can be put back in float by an input, per run.

Why: the search (search.py) measures the model with many sets of float nodes; quantizing and
loading a model per set costs seconds. Here one session answers every set: each candidate runs
both ways and a `Where` on a boolean input picks which result flows on; for dynamic int8 that is
the model `nodes_to_exclude=[...]` would write (up to ORT's fusions; answers are checked on the
real file).

Contract: `switched(quantized, float_model, candidates)` returns `(model, switches)`: a copy of
`quantized` where each candidate the quantizer changed gets its float node back (outputs
`<out>__float`, float weights re-added if dropped), the quantized output renamed `<out>__int8`,
and `Where(<switch>, <out>__float, <out>__int8) -> <out>`. Candidates reading a tensor the
quantizer removed or recomputes (a folded Clip/Relu) are not switched; body nodes are switched in
their body. `switches`: candidate -> its boolean input. Inputs unchanged. `SwitchedRunner` runs it
with a given set of float nodes."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

from onnxport.core.graph.uses import bodies, has_bodies

FLOAT_SUFFIX, INT8_SUFFIX, SWITCH_PREFIX = "__float", "__int8", "onnxport.keep_float."


def switched(quantized: onnx.ModelProto, float_model: onnx.ModelProto, candidates: Iterable[str],
             in_place: bool = False) -> tuple[onnx.ModelProto, dict[str, str]]:
    """See the module docstring (`in_place`: edit `quantized` itself, saving a copy of its weights)."""
    model = quantized
    if not in_place:
        model = onnx.ModelProto()
        model.CopyFrom(quantized)
    switches: dict[str, str] = {}
    wanted = list(dict.fromkeys(candidates))
    for q_graph, f_graph, q_scope, f_scope in _graph_pairs(model.graph, float_model.graph, [], []):
        _switch_graph(q_graph, f_graph, q_scope, f_scope, wanted, switches, model.graph)
    return model, switches


def _graph_pairs(q_graph: onnx.GraphProto, f_graph: onnx.GraphProto, q_outer: list, f_outer: list):
    """(quantized graph, float graph, their outer scopes) for the main graph and every body, matched
    through the node holding it (by its first output: the quantizers keep those names) and attribute."""
    q_scope, f_scope = [*q_outer, q_graph], [*f_outer, f_graph]
    yield q_graph, f_graph, q_scope, f_scope
    f_holders = {_key(n): n for n in f_graph.node if has_bodies(n)}
    for node in q_graph.node:
        f_node = f_holders.get(_key(node)) if has_bodies(node) else None
        if f_node is None:
            continue
        f_bodies = {}
        for attr, body in bodies(f_node):
            f_bodies.setdefault(attr, []).append(body)
        seen: dict[str, int] = {}
        for attr, body in bodies(node):
            k = seen[attr] = seen.get(attr, -1) + 1
            if k < len(f_bodies.get(attr, [])):
                yield from _graph_pairs(body, f_bodies[attr][k], q_scope, f_scope)


def _key(node: onnx.NodeProto) -> tuple[str, str]:
    return node.op_type, next((o for o in node.output if o), "")


def _switch_graph(graph: onnx.GraphProto, f_graph: onnx.GraphProto, q_scope: list, f_scope: list,
                  candidates: list[str], switches: dict[str, str], main: onnx.GraphProto) -> None:
    """Switch the candidates of one graph (a body reads the switch, a main-graph input, from outside).
    A name found in several graphs gets one switch, as `nodes_to_exclude` treats them alike."""
    float_nodes = {n.name: n for n in f_graph.node if n.name}
    float_inits = {t.name: t for g in f_scope for t in g.initializer}
    have_inits = {t.name for g in q_scope for t in g.initializer}
    producer_index = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    produced = set(producer_index)
    q_kind = {o: n.op_type for n in graph.node for o in n.output if o}
    f_kind = {o: n.op_type for n in f_graph.node for o in n.output if o}
    available = {name for g in q_scope for name in [*(o for n in g.node for o in n.output), *(i.name for i in g.input),
                                                     *(t.name for t in g.initializer)]}
    after: dict[int, list[onnx.NodeProto]] = {}
    for name in candidates:
        node = float_nodes.get(name)
        outs = [o for o in node.output if o] if node is not None else []
        if not outs or any(o not in producer_index for o in outs):
            continue
        if any(i and ((i not in available and i not in float_inits)
                      or q_kind.get(i, f_kind.get(i)) != f_kind.get(i)) for i in node.input):
            continue  # QDQ folded a Clip/Relu into its producer: that tensor is gone, or holds unclipped values
        producers = {producer_index[o] for o in outs}
        if any(_same_node(graph.node[i], node) for i in producers):
            continue  # not quantized
        if name not in switches:
            switches[name] = f"{SWITCH_PREFIX}{len(switches)}"
            main.input.append(onnx.helper.make_tensor_value_info(switches[name], onnx.TensorProto.BOOL, []))
        switch = switches[name]
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = f"{node.name}{FLOAT_SUFFIX}"
        del copy.output[:]
        copy.output.extend([o + FLOAT_SUFFIX if o else o for o in node.output])
        last = max(producers)
        joins = []
        for out in outs:
            q_node = graph.node[producer_index[out]]
            q_node.output[list(q_node.output).index(out)] = out + INT8_SUFFIX
            joins.append(onnx.helper.make_node("Where", [switch, out + FLOAT_SUFFIX, out + INT8_SUFFIX], [out],
                                               name=f"{node.name}/onnxport_switch/{out}"))
        after.setdefault(last, []).extend([copy, *joins])
        for i, inp in enumerate(node.input):
            if inp in float_inits and inp in produced:  # QDQ: a DequantizeLinear now yields it (a Conv bias)
                copy.input[i] = inp + FLOAT_SUFFIX
                if copy.input[i] not in have_inits:
                    graph.initializer.append(onnx.TensorProto())
                    graph.initializer[-1].CopyFrom(float_inits[inp])
                    graph.initializer[-1].name = copy.input[i]
                    have_inits.add(copy.input[i])
            elif inp in float_inits and inp not in have_inits:
                graph.initializer.append(float_inits[inp])
                have_inits.add(inp)
    if not after:
        return
    nodes = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    for i, n in enumerate(nodes):
        ordered.append(n)
        ordered.extend(after.get(i, []))
    del graph.node[:]
    graph.node.extend(ordered)
    del graph.value_info[:]  # ORT infers the types; stale entries for renamed tensors would only mislead it


def _same_node(a: onnx.NodeProto, b: onnx.NodeProto) -> bool:
    return a.op_type == b.op_type and a.domain == b.domain and list(a.input) == list(b.input)


class SwitchedRunner:
    """Runs a switched model on fixed feeds with a chosen set of float nodes."""

    def __init__(self, sess, switches: dict[str, str], feeds: list[dict[str, np.ndarray]], outputs: list[str]):
        self.sess = sess
        self.switches = switches
        self.feeds = feeds
        self.outputs = outputs
        self.runs = 0

    def run(self, keep_float: Iterable[str]) -> list[list[np.ndarray]]:
        """The outputs for each feed, with the nodes in `keep_float` (candidates only) in float."""
        flags = {s: np.array(False) for s in self.switches.values()}
        for name in keep_float:
            if name in self.switches:
                flags[self.switches[name]] = np.array(True)
        self.runs += 1
        return [self.sess.run(self.outputs, {**feed, **flags}) for feed in self.feeds]
