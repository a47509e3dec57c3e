"""Small models built with onnx.helper for core tests (no training package, no torch).

`eval_like_mlp` mimics what ORT's generate_artifacts writes for an eval graph: parameters are graph
inputs, the only graph output is the loss, `labels` feeds the loss.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.io.parameter_set import ParameterSet, ParamTensor

OPSET = 17


def make_model(nodes, inputs, outputs, initializers=(), opset: int = OPSET, ir_version: int = 8) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def mlp_weights(seed: int = 0, d_in: int = 8, d_hidden: int = 16, d_out: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "fc1.weight": rng.standard_normal((d_hidden, d_in)).astype(np.float32),
        "fc1.bias": rng.standard_normal(d_hidden).astype(np.float32),
        "fc2.weight": rng.standard_normal((d_out, d_hidden)).astype(np.float32),
        "fc2.bias": rng.standard_normal(d_out).astype(np.float32),
    }


def decisive_mlp_weights(seed: int = 0, d_hidden: int = 256) -> dict[str, np.ndarray]:
    """`mlp_weights` whose first class wins every input by a wide margin (its bias over ten times
    the logits' range): int8 keeps every argmax on any CPU, 7-bit weights (AVX2 without VNNI) too,
    where a random classifier's near-ties flip one held-out answer in 32 and miss the 0.99 target."""
    weights = mlp_weights(seed=seed, d_hidden=d_hidden)
    weights["fc2.bias"][0] += np.float32(1000.0)
    return weights


def _mlp_nodes() -> list[onnx.NodeProto]:
    """torch-style Linear layers exported in training mode: MatMul with a Transpose'd weight."""
    return [
        helper.make_node("Transpose", ["fc1.weight"], ["fc1.wT"], name="/fc1/Transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["input", "fc1.wT"], ["fc1.mm"], name="/fc1/MatMul"),
        helper.make_node("Add", ["fc1.mm", "fc1.bias"], ["fc1.out"], name="/fc1/Add"),
        helper.make_node("Relu", ["fc1.out"], ["hidden"], name="/act/Relu"),
        helper.make_node("Dropout", ["hidden", "ratio", "training_mode"], ["dropped", "mask"],
                         name="/dropout/Dropout"),
        helper.make_node("Transpose", ["fc2.weight"], ["fc2.wT"], name="/fc2/Transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["dropped", "fc2.wT"], ["fc2.mm"], name="/fc2/MatMul"),
        helper.make_node("Add", ["fc2.mm", "fc2.bias"], ["logits"], name="/fc2/Add"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="/softmax/Softmax", axis=-1),
    ]


def _dropout_consts() -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
            numpy_helper.from_array(np.array(True), "training_mode")]


def forward_mlp(weights: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """A forward model: weights as initializers, outputs logits + probabilities."""
    weights = weights or mlp_weights()
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()] + _dropout_consts()
    return make_model(
        _mlp_nodes(),
        [helper.make_tensor_value_info("input", T.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("probabilities", T.FLOAT, ["batch", 4])],
        inits,
    )


def eval_like_mlp(d_hidden: int = 16) -> onnx.ModelProto:
    """An ORT-style eval graph: parameters are inputs; a loss is the only graph output."""
    weights = mlp_weights(d_hidden=d_hidden)
    nodes = _mlp_nodes() + [
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["onnx::loss::1", "log_prob"],
                         name="onnx::SoftmaxCrossEntropyLoss::2", reduction="mean"),
    ]
    inputs = [helper.make_tensor_value_info("input", T.FLOAT, ["batch", 8]),
              helper.make_tensor_value_info("labels", T.INT64, ["batch"])]
    inputs += [helper.make_tensor_value_info(k, T.FLOAT, list(v.shape)) for k, v in weights.items()]
    return make_model(nodes, inputs, [helper.make_tensor_value_info("onnx::loss::1", T.FLOAT, [])],
                      _dropout_consts())


def param_set(arrays: dict[str, np.ndarray], frozen: set[str] = frozenset(), source: str = "test") -> ParameterSet:
    params = {
        name: ParamTensor(name, helper.np_dtype_to_tensor_dtype(a.dtype), tuple(a.shape),
                          (lambda a=a: a), source=source, trainable=name not in frozen)
        for name, a in arrays.items()
    }
    return ParameterSet(params, kind="test")


def reference_mlp(x: np.ndarray, w: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """numpy reference of the MLP in inference mode (dropout off)."""
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    logits = h @ w["fc2.weight"].T + w["fc2.bias"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return logits, e / e.sum(-1, keepdims=True)


def session_for(path, weights: dict[str, np.ndarray] | None = None):
    """The session the app holds for the model file at `path`, its parameters `weights` (no checkpoint file)."""
    from pathlib import Path

    from onnxport.core.io.model_io import load_graph
    from onnxport.core.workflow.session import ModelSession

    return ModelSession(model_path=Path(path), model=load_graph(path), params=param_set(weights) if weights else None)


def selection_preview(model: onnx.ModelProto, outputs: list[str], weights: dict[str, np.ndarray] | None = None,
                      path=None) -> onnx.ModelProto:
    """What the Preview draws for `outputs`: the export's graph of that selection without its weights."""
    from onnxport.core.export.selection_graph import SelectionGraphs

    return SelectionGraphs(model, path, param_set(weights) if weights else None).get(outputs).preview
