"""Big graphs for the open-at-scale benchmark (gui_bench), written quickly and without weights to speak of.

- `wide_model`: 8 chains of Relus, every node in its own nested scope (`/stack3/layer.17/op2/Relu`):
  the worst case for the outputs tree (one scope group per tensor).
- `transformer_model`: what exporters write for a decoder: per layer an RMSNorm written out as ops,
  q/k/v/o projections with weights (initializers, tiny: the graph is what is measured), reshape/
  transpose into heads, scaled scores, Softmax, the SiLU-gated MLP and residual Adds, named in
  torch.onnx's scopes (`/model/layers.3/self_attn/q_proj/MatMul`), ~40 nodes per layer, a few
  tensors per scope, typed graph inputs so shape inference has work to do.
Nodes are built as protobufs directly (onnx.helper's checks cost more than the graph at 300k nodes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HIDDEN = 8
HEADS = 2


def _node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs) -> onnx.NodeProto:
    node = onnx.NodeProto(op_type=op, name=name)
    node.input.extend(inputs)
    node.output.extend(outputs)
    for key, value in attrs.items():
        node.attribute.append(helper.make_attribute(key, value))
    return node


def _save(path: Path, nodes, inputs, outputs, initializers=()) -> None:
    graph = onnx.GraphProto(name=path.stem)
    graph.node.extend(nodes)
    graph.input.extend(inputs)
    graph.output.extend(outputs)
    graph.initializer.extend(initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def wide_model(path: Path, tensors: int) -> int:
    """`tensors` node outputs: 8 stacks x N layers x 5 ops (scoped like a transformer export). Returns the node count."""
    nodes, outputs = [], []
    per_layer = 5
    layers = tensors // (8 * per_layer)
    for s in range(8):
        current = "x"
        for layer in range(layers):
            for k in range(per_layer):
                name = f"/stack{s}/layer.{layer}/op{k}/Relu"
                out = f"{name}_output_0"
                nodes.append(_node("Relu", [current], [out], name))
                current = out
        outputs.append(current)
    _save(path, nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
          [helper.make_tensor_value_info(o, T.FLOAT, ["batch", 4]) for o in outputs])
    return len(nodes)


def transformer_model(path: Path, nodes_wanted: int) -> int:
    """A decoder-like graph of about `nodes_wanted` nodes (see the module docstring). Returns the node count."""
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    head_dim = HIDDEN // HEADS

    def weight(name: str, shape) -> str:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name))
        return name

    def const(name: str, values, dtype=np.int64) -> str:
        inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    split_shape = const("/model/const/split_heads", [0, -1, HEADS, head_dim])
    merge_shape = const("/model/const/merge_heads", [0, -1, HIDDEN])
    scale = const("/model/const/scale", 1.0 / np.sqrt(head_dim), np.float32)
    eps = const("/model/const/eps", 1e-6, np.float32)
    two = const("/model/const/two", 2.0, np.float32)
    per_layer = 41
    layers = max(1, nodes_wanted // per_layer)
    hidden = "/model/embed_tokens/Gather_output_0"
    nodes.append(_node("Gather", [weight("model.embed_tokens.weight", [64, HIDDEN]), "input_ids"], [hidden],
                       "/model/embed_tokens/Gather"))

    def op(kind: str, scope: str, inputs: list[str], suffix: str = "", **attrs) -> str:
        name = f"{scope}/{kind}{suffix}"
        out = f"{name}_output_0"
        nodes.append(_node(kind, inputs, [out], name, **attrs))
        return out

    def rms_norm(scope: str, x: str, w: str) -> str:
        sq = op("Pow", scope, [x, two])
        mean = op("ReduceMean", scope, [sq], axes=[-1], keepdims=1)
        shifted = op("Add", scope, [mean, eps])
        root = op("Sqrt", scope, [shifted])
        normed = op("Div", scope, [x, root])
        return op("Mul", scope, [normed, w])

    def linear(scope: str, x: str, w: str) -> str:
        return op("MatMul", scope, [x, w])

    for i in range(layers):
        base = f"/model/layers.{i}"
        pre = f"model.layers.{i}"
        normed = rms_norm(f"{base}/input_layernorm", hidden, weight(f"{pre}.input_layernorm.weight", [HIDDEN]))
        attn = f"{base}/self_attn"
        heads = {}
        for proj in ("q", "k", "v"):
            scope = f"{attn}/{proj}_proj"
            x = linear(scope, normed, weight(f"{pre}.self_attn.{proj}_proj.weight", [HIDDEN, HIDDEN]))
            x = op("Add", scope, [x, weight(f"{pre}.self_attn.{proj}_proj.bias", [HIDDEN])])
            x = op("Reshape", attn, [x, split_shape], f"_{proj}")
            heads[proj] = op("Transpose", attn, [x], f"_{proj}", perm=[0, 2, 1, 3] if proj != "k" else [0, 2, 3, 1])
        scores = op("MatMul", attn, [heads["q"], heads["k"]], "_scores")
        scores = op("Mul", attn, [scores, scale], "_scale")
        probs = op("Softmax", attn, [scores], axis=-1)
        context = op("MatMul", attn, [probs, heads["v"]], "_context")
        context = op("Transpose", attn, [context], "_context", perm=[0, 2, 1, 3])
        context = op("Reshape", attn, [context, merge_shape], "_context")
        out = linear(f"{attn}/o_proj", context, weight(f"{pre}.self_attn.o_proj.weight", [HIDDEN, HIDDEN]))
        hidden = op("Add", base, [hidden, out], "_attn_residual")
        normed = rms_norm(f"{base}/post_attention_layernorm", hidden,
                          weight(f"{pre}.post_attention_layernorm.weight", [HIDDEN]))
        mlp = f"{base}/mlp"
        gate = linear(f"{mlp}/gate_proj", normed, weight(f"{pre}.mlp.gate_proj.weight", [HIDDEN, 2 * HIDDEN]))
        sig = op("Sigmoid", f"{mlp}/act_fn", [gate])
        act = op("Mul", f"{mlp}/act_fn", [gate, sig])
        up = linear(f"{mlp}/up_proj", normed, weight(f"{pre}.mlp.up_proj.weight", [HIDDEN, 2 * HIDDEN]))
        both = op("Mul", mlp, [act, up])
        down = linear(f"{mlp}/down_proj", both, weight(f"{pre}.mlp.down_proj.weight", [2 * HIDDEN, HIDDEN]))
        hidden = op("Add", base, [hidden, down], "_mlp_residual")
        hidden = op("Identity", base, [hidden], "_out")
    normed = rms_norm("/model/norm", hidden, weight("model.norm.weight", [HIDDEN]))
    logits = linear("/lm_head", normed, weight("lm_head.weight", [HIDDEN, 64]))
    nodes.append(_node("Identity", [logits], ["logits"], "/lm_head/Identity"))
    _save(path, nodes, [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "sequence"])],
          [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", "sequence", 64])], inits)
    return len(nodes)
