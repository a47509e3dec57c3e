"""A quantized model in which each quantized node can be put back in float by an input, per run.

Why: finding which nodes to keep in float (search.py) means measuring the model with many
different sets of float nodes. Quantizing and loading a model per set costs seconds each on a
real transformer; here one session answers every set: each candidate node runs both ways and a
`Where` on a boolean input picks which result flows on. A dynamic int8 model reads its inputs in
float and quantizes them at run time, so "this node in float, the rest as quantized" computed
this way is the model `quantize_dynamic(..., nodes_to_exclude=[node])` would write (up to the
float rounding of ONNX Runtime's fusions; the search's answer is always checked on the real file).

Contract: `switched(quantized, float_model, candidates)` returns `(model, switches)`: a copy of
`quantized` where, for each candidate node of `float_model` whose outputs the quantizer now
produces otherwise, the float node is added (outputs renamed `<out>__float`, its float weights
added back if the quantizer dropped them), the quantized producer's output is renamed
`<out>__int8`, and `Where(<switch>, <out>__float, <out>__int8) -> <out>` joins them. `switches`
maps candidate node name -> its boolean scalar input name. Candidates the quantizer left alone
are not in `switches`. Both inputs are unchanged. `SwitchedRunner` runs it on feeds with a given
set of float nodes.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

FLOAT_SUFFIX, INT8_SUFFIX, SWITCH_PREFIX = "__float", "__int8", "onnxport.keep_float."


def switched(quantized: onnx.ModelProto, float_model: onnx.ModelProto, candidates: Iterable[str],
             in_place: bool = False) -> tuple[onnx.ModelProto, dict[str, str]]:
    """See the module docstring (`in_place`: edit `quantized` itself, saving a copy of its weights)."""
    model = quantized
    if not in_place:
        model = onnx.ModelProto()
        model.CopyFrom(quantized)
    graph = model.graph
    float_nodes = {n.name: n for n in float_model.graph.node if n.name}
    float_inits = {t.name: t for t in float_model.graph.initializer}
    have_inits = {t.name for t in graph.initializer}
    producer_index = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    after: dict[int, list[onnx.NodeProto]] = {}
    switches: dict[str, str] = {}
    for name in dict.fromkeys(candidates):
        node = float_nodes.get(name)
        outs = [o for o in node.output if o] if node is not None else []
        if not outs or any(o not in producer_index for o in outs):
            continue
        producers = {producer_index[o] for o in outs}
        if any(_same_node(graph.node[i], node) for i in producers):
            continue  # not quantized
        switch = f"{SWITCH_PREFIX}{len(switches)}"
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
        for inp in node.input:
            if inp in float_inits and inp not in have_inits:
                graph.initializer.append(float_inits[inp])
                have_inits.add(inp)
        graph.input.append(onnx.helper.make_tensor_value_info(switch, onnx.TensorProto.BOOL, []))
        switches[name] = switch
    nodes = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    for i, n in enumerate(nodes):
        ordered.append(n)
        ordered.extend(after.get(i, []))
    del graph.node[:]
    graph.node.extend(ordered)
    del graph.value_info[:]  # ORT infers the types; stale entries for renamed tensors would only mislead it
    return model, switches


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
