"""A BERT-like float encoder the size of all-MiniLM-L6-v2 (6 layers, hidden 384, 30,522-token
vocabulary: ~90 MB of inline weights, ~500 nodes), written without torch and without a download.

The graph is what torch.onnx writes for such an encoder at opset 14: embeddings (Gather, Add),
then per layer the attention (q/k/v MatMul + Add, heads split with Reshape/Transpose, scores,
Softmax, context), LayerNorm written out as ops, and the GELU (Erf) MLP, named in torch.onnx's
scopes (`/encoder/layer.3/attention/self/query/MatMul`). Weights are seeded random floats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

VOCAB, HIDDEN, HEADS, LAYERS, FFN, POSITIONS = 30522, 384, 12, 6, 1536, 512


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.names: dict[str, int] = {}

    def weight(self, name: str, shape: tuple[int, ...], ones: bool = False) -> str:
        values = np.ones(shape, np.float32) if ones else (self.rng.standard_normal(shape, np.float32) * 0.02)
        self.weights.append(numpy_helper.from_array(values, name))
        return name

    def const(self, name: str, values, dtype=np.int64) -> str:
        self.weights.append(numpy_helper.from_array(np.asarray(values, dtype), name))
        return name

    def op(self, kind: str, scope: str, inputs: list[str], **attrs) -> str:
        name = f"{scope}/{kind}"
        seen = self.names[name] = self.names.get(name, -1) + 1
        name = f"{name}_{seen}" if seen else name  # as torch.onnx names repeats: /Add, /Add_1
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(kind, inputs, [out], name=name, **attrs))
        return out


def _layer_norm(b: _Builder, x: str, scope: str) -> str:
    mean = b.op("ReduceMean", scope, [x], axes=[-1])
    centered = b.op("Sub", scope, [x, mean])
    var = b.op("ReduceMean", scope, [b.op("Pow", scope, [centered, "two"])], axes=[-1])
    std = b.op("Sqrt", scope, [b.op("Add", scope, [var, "eps"])])
    normed = b.op("Div", scope, [centered, std])
    gamma = b.weight(f"{scope.strip('/').replace('/', '.')}.weight", (HIDDEN,), ones=True)
    beta = b.weight(f"{scope.strip('/').replace('/', '.')}.bias", (HIDDEN,))
    return b.op("Add", scope, [b.op("Mul", scope, [normed, gamma]), beta])


def _linear(b: _Builder, x: str, scope: str, n_in: int, n_out: int) -> str:
    prefix = scope.strip("/").replace("/", ".")
    w = b.weight(f"onnx::MatMul_{prefix}", (n_in, n_out))
    bias = b.weight(f"{prefix}.bias", (n_out,))
    return b.op("Add", scope, [bias, b.op("MatMul", scope, [x, w])])


def _heads(b: _Builder, x: str, scope: str) -> str:
    """[batch, seq, hidden] -> [batch, heads, seq, head_dim], the shape computed as torch.onnx does."""
    shape = b.op("Shape", scope, [x])
    batch = b.op("Unsqueeze", scope, [b.op("Gather", scope, [shape, "zero"], axis=0), "axis0"])
    seq = b.op("Unsqueeze", scope, [b.op("Gather", scope, [shape, "one"], axis=0), "axis0"])
    target = b.op("Concat", scope, [batch, seq, "heads", "head_dim"], axis=0)
    return b.op("Transpose", scope, [b.op("Reshape", scope, [x, target])], perm=[0, 2, 1, 3])


def _attention(b: _Builder, x: str, mask: str, layer: int) -> str:
    base = f"/encoder/layer.{layer}/attention"
    q, k, v = (_heads(b, _linear(b, x, f"{base}/self/{n}", HIDDEN, HIDDEN), f"{base}/self/{n}")
               for n in ("query", "key", "value"))
    kt = b.op("Transpose", f"{base}/self", [k], perm=[0, 1, 3, 2])
    scores = b.op("Div", f"{base}/self", [b.op("MatMul", f"{base}/self", [q, kt]), "sqrt_head_dim"])
    probs = b.op("Softmax", f"{base}/self", [b.op("Add", f"{base}/self", [scores, mask])], axis=-1)
    context = b.op("Transpose", f"{base}/self", [b.op("MatMul", f"{base}/self", [probs, v])], perm=[0, 2, 1, 3])
    shape = b.op("Shape", f"{base}/self", [x])
    merged = b.op("Reshape", f"{base}/self", [context, shape])
    out = _linear(b, merged, f"{base}/output/dense", HIDDEN, HIDDEN)
    return _layer_norm(b, b.op("Add", f"{base}/output", [out, x]), f"{base}/output/LayerNorm")


def _mlp(b: _Builder, x: str, layer: int) -> str:
    base = f"/encoder/layer.{layer}"
    h = _linear(b, x, f"{base}/intermediate/dense", HIDDEN, FFN)
    scope = f"{base}/intermediate/intermediate_act_fn"
    erf = b.op("Erf", scope, [b.op("Div", scope, [h, "sqrt_two"])])
    gelu = b.op("Mul", scope, [b.op("Mul", scope, [h, b.op("Add", scope, [erf, "one_f"])]), "half"])
    out = _linear(b, gelu, f"{base}/output/dense", FFN, HIDDEN)
    return _layer_norm(b, b.op("Add", f"{base}/output", [out, x]), f"{base}/output/LayerNorm")


def write_bert_like(path: Path, seed: int = 0) -> Path:
    """Write the encoder to `path` (one file, weights inline); returns `path`."""
    b = _Builder(seed)
    for name, value, dtype in (("two", 2.0, np.float32), ("eps", 1e-12, np.float32), ("sqrt_two", 2 ** 0.5, np.float32),
                               ("one_f", 1.0, np.float32), ("half", 0.5, np.float32),
                               ("sqrt_head_dim", (HIDDEN // HEADS) ** 0.5, np.float32), ("zero", 0, np.int64),
                               ("one", 1, np.int64), ("min_f", -1e4, np.float32)):
        b.const(name, value, dtype)
    b.const("axis0", [0])
    b.const("heads", [HEADS])
    b.const("head_dim", [HIDDEN // HEADS])
    scope = "/embeddings"
    words = b.op("Gather", f"{scope}/word_embeddings", [b.weight("embeddings.word_embeddings.weight", (VOCAB, HIDDEN)),
                                                         "input_ids"])
    types = b.op("Gather", f"{scope}/token_type_embeddings",
                 [b.weight("embeddings.token_type_embeddings.weight", (2, HIDDEN)), "token_type_ids"])
    seq = b.op("Unsqueeze", scope, [b.op("Gather", scope, [b.op("Shape", scope, ["input_ids"]), "one"], axis=0), "axis0"])
    ids = b.op("Slice", scope, [b.const("embeddings.position_ids", np.arange(POSITIONS)[None]), b.const("start", [0]),
                                seq, b.const("slice_axis", [1])])
    positions = b.op("Gather", f"{scope}/position_embeddings",
                     [b.weight("embeddings.position_embeddings.weight", (POSITIONS, HIDDEN)), ids])
    x = _layer_norm(b, b.op("Add", scope, [b.op("Add", scope, [words, types]), positions]), f"{scope}/LayerNorm")
    mask = b.op("Unsqueeze", "/extended", ["attention_mask", b.const("mask_axes", [1, 2])])
    mask = b.op("Mul", "/extended", [b.op("Sub", "/extended", ["one_f", b.op("Cast", "/extended", [mask], to=T.FLOAT)]),
                                     "min_f"])
    for layer in range(LAYERS):
        x = _mlp(b, _attention(b, x, mask, layer), layer)
    b.nodes[-1].output[0] = "last_hidden_state"
    inputs = [helper.make_tensor_value_info(n, T.INT64, ["batch", "sequence"])
              for n in ("input_ids", "token_type_ids", "attention_mask")]
    graph = helper.make_graph(b.nodes, "bert_like", inputs,
                              [helper.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "sequence", HIDDEN])],
                              initializer=b.weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="bench.bert_model")
    model.ir_version = 7
    onnx.save(model, path)
    return path
