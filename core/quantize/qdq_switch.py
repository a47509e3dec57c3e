"""A static QDQ model in which each quantized node can be put back in float by inputs, per run.

Why: the static search (search_static.py) measures many sets of float nodes. float_switch.py's float
copies do not work for QDQ (the quantizer folds a Relu/Clip into its producer, whose output then
takes its name, unclipped), so here the switches sit on the quantization itself: every
DequantizeLinear gets a `Where(switch, float, dq)`, the float side being the tensor the
QuantizeLinear reads (re-clipped where a Relu/Clip was folded) or the float initializer. A tensor
stays quantized while any quantized node touches it, so a switch turns on when every candidate
touching it is kept float: the model `nodes_to_exclude=S` would write, up to bias rounding
(answers are checked on the real file).

Contract: `qdq_switched(quantized, float_model, candidates)` returns `(model, switches)`: switch
input -> the candidates that must all be float for it to turn on. `QdqRunner(sess, switches,
feeds, outputs).run(keep_float)` as `float_switch.SwitchedRunner`. Main graph only.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

SWITCH_PREFIX = "onnxport.qdq_float."
FOLDED = ("Relu", "Clip")


def qdq_switched(quantized: onnx.ModelProto, float_model: onnx.ModelProto,
                 candidates: Iterable[str]) -> tuple[onnx.ModelProto, dict[str, list[str]]]:
    """See the module docstring (edits `quantized` in place)."""
    graph = quantized.graph
    wanted = set(candidates)
    f_graph = float_model.graph
    float_inits = {t.name: t for t in f_graph.initializer}
    f_producer = {o: n for n in f_graph.node for o in n.output if o}
    q_kind = {o: n.op_type for n in graph.node for o in n.output if o}
    q_inits = {t.name for t in graph.initializer}
    taken = set(q_kind) | q_inits | {i.name for i in graph.input}
    producer_name = {o: n.name for n in graph.node for o in n.output if o}
    consumers: dict[str, list[str]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n.name)
    q_input = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}
    switches: dict[str, list[str]] = {}
    after: dict[int, list[onnx.NodeProto]] = {}

    def float_init(name: str) -> str:
        """The float model's initializer `name` in the quantized graph, under a free name."""
        new = name if name not in taken else name + "__float"
        if new not in q_inits:
            t = onnx.TensorProto()
            t.CopyFrom(float_inits[name])
            t.name = new
            graph.initializer.append(t)
            q_inits.add(new)
            taken.add(new)
        return new

    for index, node in enumerate(graph.node):
        if node.op_type != "DequantizeLinear" or not node.output[0]:
            continue
        out, src = node.output[0], node.input[0]
        users = [c for c in consumers.get(out, []) if c in wanted]
        extra: list[onnx.NodeProto] = []
        if src in q_input:  # an activation: float side is what the QuantizeLinear reads
            raw = q_input[src]
            touching = users + ([producer_name[raw]] if producer_name.get(raw) in wanted else [])
            f_node = f_producer.get(raw)
            if f_node is not None and f_node.op_type in FOLDED and q_kind.get(raw) != f_node.op_type:
                clip = onnx.NodeProto()
                clip.CopyFrom(f_node)
                clip.name = f"{f_node.name}__float"
                del clip.input[:]
                clip.input.extend([raw] + [float_init(i) if i in float_inits else i for i in f_node.input[1:]])
                del clip.output[:]
                clip.output.append(raw + "__float")
                extra.append(clip)
                raw = raw + "__float"
        else:  # a weight or bias: float side is the float model's initializer
            original = src[: -len("_quantized")] if src.endswith("_quantized") else src
            if original not in float_inits:
                continue
            touching = users
            raw = None
        if not touching:
            continue
        if raw is None:
            raw = float_init(original)
        switch = f"{SWITCH_PREFIX}{len(switches)}"
        switches[switch] = list(dict.fromkeys(touching))
        graph.input.append(onnx.helper.make_tensor_value_info(switch, onnx.TensorProto.BOOL, []))
        node.output[0] = out + "__int8"
        extra.append(onnx.helper.make_node("Where", [switch, raw, out + "__int8"], [out], name=f"{out}/onnxport_switch"))
        after[index] = extra
    nodes = list(graph.node)
    del graph.node[:]
    for i, n in enumerate(nodes):
        graph.node.append(n)
        graph.node.extend(after.get(i, []))
    del graph.value_info[:]
    return quantized, switches


class QdqRunner:
    """Runs a QDQ-switched model on fixed feeds with a chosen set of float nodes."""

    def __init__(self, sess, switches: dict[str, list[str]], feeds: list[dict[str, np.ndarray]],
                 outputs: list[str]) -> None:
        self.sess, self.switches, self.feeds, self.outputs = sess, switches, feeds, outputs
        self.runs = 0

    def run(self, keep_float: Iterable[str]) -> list[list[np.ndarray]]:
        keep = set(keep_float)
        flags = {s: np.array(all(n in keep for n in nodes)) for s, nodes in self.switches.items()}
        self.runs += 1
        return [self.sess.run(self.outputs, {**feed, **flags}) for feed in self.feeds]
