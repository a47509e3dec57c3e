"""Small float32 models for the quantize/validate/bench tests, built with onnx.helper (no torch).

- `cnn`: Conv -> BatchNormalization -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm.
- `eval_like_cnn`: the same as an ORT-style eval graph: parameters are graph inputs, BatchNorm in
  training mode with its running-statistics outputs, a loss on labels.
- `encoder`: a one-layer transformer encoder (token + position embeddings, LayerNorm,
  self-attention with a mask, GELU feed-forward) over `input_ids`/`attention_mask`.
- `outlier_mlp`: an MLP whose hidden layer has one huge channel (as trained transformers' FFNs
  do): per-tensor int8 activations of the second MatMul lose everything else.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from .model_builders import make_model


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _init(arrays: dict[str, np.ndarray]) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(v, k) for k, v in arrays.items()]


def cnn_weights(seed: int = 0, c: int = 8, classes: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "conv1.weight": _f32(rng.standard_normal((c, 3, 3, 3)) * 0.3),
        "conv1.bias": _f32(rng.standard_normal(c) * 0.1),
        "bn.weight": _f32(1 + 0.1 * rng.standard_normal(c)),
        "bn.bias": _f32(0.1 * rng.standard_normal(c)),
        "bn.running_mean": _f32(0.1 * rng.standard_normal(c)),
        "bn.running_var": _f32(1 + 0.2 * rng.random(c)),
        "conv2.weight": _f32(rng.standard_normal((c, c, 3, 3)) * 0.2),
        "conv2.bias": _f32(rng.standard_normal(c) * 0.1),
        "fc.weight": _f32(rng.standard_normal((classes, c)) * 0.5),
        "fc.bias": _f32(rng.standard_normal(classes) * 0.1),
    }


def _cnn_nodes(bn_training: bool) -> list[onnx.NodeProto]:
    bn_outputs = ["bn_out", "bn.running_mean_out", "bn.running_var_out"] if bn_training else ["bn_out"]
    bn_attrs = {"epsilon": 1e-5, "momentum": 0.9}
    if bn_training:
        bn_attrs["training_mode"] = 1
    return [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv", pads=[1] * 4),
        helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         bn_outputs, name="/bn/BatchNormalization", **bn_attrs),
        helper.make_node("Relu", ["bn_out"], ["r1"], name="/act1/Relu"),
        helper.make_node("Conv", ["r1", "conv2.weight", "conv2.bias"], ["c2"], name="/conv2/Conv", pads=[1] * 4),
        helper.make_node("Relu", ["c2"], ["r2"], name="/act2/Relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["pooled"], ["flat"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]


def cnn(seed: int = 0, c: int = 8) -> onnx.ModelProto:
    w = cnn_weights(seed, c=c)
    return make_model(_cnn_nodes(False), [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 8, 8])],
                      [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 5])], _init(w))


def eval_like_cnn() -> onnx.ModelProto:
    w = cnn_weights(seed=99)  # the graph's declared shapes; values come from the checkpoint
    nodes = _cnn_nodes(True) + [
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="/loss", reduction="mean"),
    ]
    inputs = [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 8, 8]),
              helper.make_tensor_value_info("labels", T.INT64, ["batch"])]
    inputs += [helper.make_tensor_value_info(k, T.FLOAT, list(v.shape)) for k, v in w.items()]
    return make_model(nodes, inputs, [helper.make_tensor_value_info("loss", T.FLOAT, [])])


def reference_cnn(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """numpy CNN in inference mode (BatchNorm with running statistics)."""
    def conv(x, k, b):
        n, c, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((n, k.shape[0], h, wd), np.float64)
        for i in range(3):
            for j in range(3):
                out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], k[:, :, i, j])
        return out + b[None, :, None, None]

    y = conv(x, w["conv1.weight"], w["conv1.bias"])
    shape = (1, -1, 1, 1)
    y = (y - w["bn.running_mean"].reshape(shape)) / np.sqrt(w["bn.running_var"].reshape(shape) + 1e-5)
    y = np.maximum(y * w["bn.weight"].reshape(shape) + w["bn.bias"].reshape(shape), 0)
    y = np.maximum(conv(y, w["conv2.weight"], w["conv2.bias"]), 0)
    return y.mean(axis=(2, 3)) @ w["fc.weight"].T + w["fc.bias"]


def encoder(seed: int = 0, vocab: int = 50, d: int = 32, ff: int = 64, max_len: int = 32) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def lin(i, o):
        return _f32(rng.standard_normal((i, o)) / np.sqrt(i))

    w = {
        "tok_emb": _f32(rng.standard_normal((vocab, d)) * 0.5), "pos_emb": _f32(rng.standard_normal((max_len, d)) * 0.1),
        "ln0.g": _f32(np.ones(d)), "ln0.b": _f32(np.zeros(d)),
        "wq": lin(d, d), "wk": lin(d, d), "wv": lin(d, d), "wo": lin(d, d), "bo": _f32(np.zeros(d)),
        "ln1.g": _f32(np.ones(d)), "ln1.b": _f32(np.zeros(d)),
        "w1": lin(d, ff), "b1": _f32(0.1 * rng.standard_normal(ff)), "w2": lin(ff, d), "b2": _f32(np.zeros(d)),
        "ln2.g": _f32(np.ones(d)), "ln2.b": _f32(np.zeros(d)),
        "scale": _f32(1 / np.sqrt(d)), "big_neg": _f32(-1e4), "one": _f32(1.0), "half": _f32(0.5),
        "sqrt2": _f32(np.sqrt(2.0)), "pool_idx": np.array(0, np.int64),
        "zero_i": np.array(0, np.int64), "one_i": np.array(1, np.int64), "axes1": np.array([1], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Shape", ["input_ids"], ["ids_shape"], name="/emb/Shape"),
        n("Gather", ["ids_shape", "one_i"], ["seq_len"], name="/emb/Gather_len", axis=0),
        n("Range", ["zero_i", "seq_len", "one_i"], ["positions"], name="/emb/Range"),
        n("Gather", ["tok_emb", "input_ids"], ["tok"], name="/emb/word/Gather"),
        n("Gather", ["pos_emb", "positions"], ["pos"], name="/emb/pos/Gather"),
        n("Add", ["tok", "pos"], ["emb"], name="/emb/Add"),
        n("LayerNormalization", ["emb", "ln0.g", "ln0.b"], ["h0"], name="/emb/LayerNorm", axis=-1),
        n("MatMul", ["h0", "wq"], ["q"], name="/attn/q/MatMul"),
        n("MatMul", ["h0", "wk"], ["k"], name="/attn/k/MatMul"),
        n("MatMul", ["h0", "wv"], ["v"], name="/attn/v/MatMul"),
        n("Transpose", ["k"], ["kT"], name="/attn/Transpose", perm=[0, 2, 1]),
        n("MatMul", ["q", "kT"], ["scores_raw"], name="/attn/qk/MatMul"),
        n("Mul", ["scores_raw", "scale"], ["scores"], name="/attn/Mul"),
        n("Cast", ["attention_mask"], ["mask_f"], name="/attn/Cast", to=T.FLOAT),
        n("Sub", ["one", "mask_f"], ["inv_mask"], name="/attn/Sub"),
        n("Mul", ["inv_mask", "big_neg"], ["mask_add"], name="/attn/Mul_mask"),
        n("Unsqueeze", ["mask_add", "axes1"], ["mask_b"], name="/attn/Unsqueeze"),
        n("Add", ["scores", "mask_b"], ["scores_m"], name="/attn/Add_mask"),
        n("Softmax", ["scores_m"], ["probs"], name="/attn/Softmax", axis=-1),
        n("MatMul", ["probs", "v"], ["ctx"], name="/attn/pv/MatMul"),
        n("MatMul", ["ctx", "wo"], ["o_mm"], name="/attn/out/MatMul"),
        n("Add", ["o_mm", "bo"], ["o"], name="/attn/out/Add"),
        n("Add", ["o", "h0"], ["res1"], name="/attn/Add_res"),
        n("LayerNormalization", ["res1", "ln1.g", "ln1.b"], ["h1"], name="/attn/LayerNorm", axis=-1),
        n("MatMul", ["h1", "w1"], ["f1_mm"], name="/ffn/in/MatMul"),
        n("Add", ["f1_mm", "b1"], ["f1"], name="/ffn/in/Add"),
        n("Div", ["f1", "sqrt2"], ["g_div"], name="/ffn/gelu/Div"),
        n("Erf", ["g_div"], ["g_erf"], name="/ffn/gelu/Erf"),
        n("Add", ["g_erf", "one"], ["g_add"], name="/ffn/gelu/Add"),
        n("Mul", ["f1", "g_add"], ["g_mul"], name="/ffn/gelu/Mul"),
        n("Mul", ["g_mul", "half"], ["gelu"], name="/ffn/gelu/Mul_half"),
        n("MatMul", ["gelu", "w2"], ["f2_mm"], name="/ffn/out/MatMul"),
        n("Add", ["f2_mm", "b2"], ["f2"], name="/ffn/out/Add"),
        n("Add", ["f2", "h1"], ["res2"], name="/ffn/Add_res"),
        n("LayerNormalization", ["res2", "ln2.g", "ln2.b"], ["last_hidden_state"], name="/ffn/LayerNorm", axis=-1),
        n("Gather", ["last_hidden_state", "pool_idx"], ["pooled"], name="/pool/Gather", axis=1),
    ]
    inputs = [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "sequence"]),
              helper.make_tensor_value_info("attention_mask", T.INT64, ["batch", "sequence"])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", T.FLOAT, ["batch", "sequence", d]),
               helper.make_tensor_value_info("pooled", T.FLOAT, ["batch", d])]
    return make_model(nodes, inputs, outputs, _init(w))


def outlier_mlp(seed: int = 0, d: int = 32, h: int = 64, o: int = 8) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w1 = _f32(rng.standard_normal((d, h)) / np.sqrt(d))
    b1 = np.zeros(h, np.float32)
    b1[0] = 500.0  # one huge hidden channel
    w2 = _f32(rng.standard_normal((h, h)) / np.sqrt(h))
    w2[0, :] = 0.0  # ...that the next layer ignores: only quantization notices it
    w3 = _f32(rng.standard_normal((h, o)) / np.sqrt(h))
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1/MatMul"),
        helper.make_node("Add", ["m1", "b1"], ["a1"], name="fc1/Add"),
        helper.make_node("Relu", ["a1"], ["h1"], name="act1"),
        helper.make_node("MatMul", ["h1", "w2"], ["m2"], name="fc2/MatMul"),
        helper.make_node("Relu", ["m2"], ["h2"], name="act2"),
        helper.make_node("MatMul", ["h2", "w3"], ["y"], name="fc3/MatMul"),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", d])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", o])],
                      _init({"w1": w1, "b1": b1, "w2": w2, "w3": w3}))


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)
