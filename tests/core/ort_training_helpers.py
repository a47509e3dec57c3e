"""Build training artifacts with ONNX Runtime's own training API, train a few steps, save.

Used by tests that compare onnxport against `Module.export_model_for_inferencing`. Every model is
built with onnx.helper (no torch), small enough that artifacts + training take well under a second.

    arts = make_trained_artifacts(tmp_path, mlp_two_outputs(), feeds=..., labels=...)
    arts.eval_model, arts.checkpoint, arts.module  # paths and the live ORT Module
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

pytest.importorskip("onnxruntime.training")
from onnxruntime.training import artifacts  # noqa: E402
from onnxruntime.training.api import CheckpointState, Module, Optimizer  # noqa: E402

OPSET = 17


@dataclass
class Spec:
    """A forward model plus what training it needs."""

    model: onnx.ModelProto
    trainable: list[str]
    frozen: list[str]
    loss_input: str  # forward output the loss reads
    inputs: dict[str, np.ndarray]  # example feeds (batch of 4)
    outputs: list[str]  # forward outputs an inference model keeps
    loss: str = "ce"  # "ce" (CrossEntropy over class labels) or "mse"


@dataclass
class Artifacts:
    folder: Path
    training_model: Path
    eval_model: Path
    optimizer_model: Path
    checkpoint: Path
    state: CheckpointState
    module: Module


def _init(rng, name: str, shape: tuple[int, ...], scale: float = 0.5) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "forward", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    return model


def mlp_two_outputs(seed: int = 0) -> Spec:
    """Gemm -> Relu -> Gemm -> logits, Softmax -> probabilities; the hidden Relu is a useful tap."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["fc1.out"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["fc1.out"], ["hidden"], name="/act/Relu"),
        helper.make_node("Gemm", ["hidden", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="/softmax/Softmax", axis=-1),
    ]
    inits = [_init(rng, "fc1.weight", (16, 8)), _init(rng, "fc1.bias", (16,)),
             _init(rng, "fc2.weight", (4, 16)), _init(rng, "fc2.bias", (4,))]
    model = _model(nodes, [helper.make_tensor_value_info("input", T.FLOAT, ["batch", 8])],
                   [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 4]),
                    helper.make_tensor_value_info("probabilities", T.FLOAT, ["batch", 4])], inits)
    return Spec(model, [t.name for t in inits], [], "logits",
                {"input": rng.standard_normal((4, 8)).astype(np.float32)}, ["logits", "probabilities"])


def mlp_with_frozen(seed: int = 1) -> Spec:
    """The same MLP with its first layer frozen (fine-tuning the head only)."""
    spec = mlp_two_outputs(seed)
    spec.trainable, spec.frozen = ["fc2.weight", "fc2.bias"], ["fc1.weight", "fc1.bias"]
    return spec


def small_cnn(seed: int = 2) -> Spec:
    """Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="/conv1/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["features_map"], name="/conv2/Relu"),
        helper.make_node("GlobalAveragePool", ["features_map"], ["gap"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["gap"], ["features"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["features", "head.weight", "head.bias"], ["logits"], name="/head/Gemm", transB=1),
    ]
    inits = [_init(rng, "conv1.weight", (4, 1, 3, 3)), _init(rng, "conv1.bias", (4,)),
             _init(rng, "conv2.weight", (8, 4, 3, 3)), _init(rng, "conv2.bias", (8,)),
             _init(rng, "head.weight", (3, 8)), _init(rng, "head.bias", (3,))]
    model = _model(nodes, [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 1, 8, 8])],
                   [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 3])], inits)
    return Spec(model, [t.name for t in inits], [], "logits",
                {"image": rng.standard_normal((4, 1, 8, 8)).astype(np.float32)}, ["logits"])


def batchnorm_model(seed: int = 3) -> Spec:
    """Conv -> BatchNormalization (inference form, running stats frozen) -> Relu -> pool -> Gemm."""
    rng = np.random.default_rng(seed)
    c = 4
    nodes = [
        helper.make_node("Conv", ["image", "conv.weight"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b"], name="/bn/BatchNormalization", epsilon=1e-5),
        helper.make_node("Relu", ["b"], ["r"], name="/act/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["f", "head.weight", "head.bias"], ["logits"], name="/head/Gemm", transB=1),
    ]
    inits = [_init(rng, "conv.weight", (c, 1, 3, 3)),
             numpy_helper.from_array((rng.random(c) + 0.5).astype(np.float32), "bn.weight"),
             _init(rng, "bn.bias", (c,)), _init(rng, "bn.running_mean", (c,), 0.1),
             numpy_helper.from_array((rng.random(c) + 0.5).astype(np.float32), "bn.running_var"),
             _init(rng, "head.weight", (3, c)), _init(rng, "head.bias", (3,))]
    model = _model(nodes, [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 1, 6, 6])],
                   [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 3])], inits)
    trainable = ["conv.weight", "bn.weight", "bn.bias", "head.weight", "head.bias"]
    return Spec(model, trainable, ["bn.running_mean", "bn.running_var"], "logits",
                {"image": rng.standard_normal((4, 1, 6, 6)).astype(np.float32)}, ["logits"])


def batchnorm_training_mode_model(seed: int = 3) -> Spec:
    """BatchNorm as a training-mode torch export writes it: training_mode=1, three outputs.

    ORT's eval graph for it keeps the three outputs with training_mode=0, which ORT itself then
    refuses to load ("number of op outputs should be 1"): train with `with_eval=False`.
    """
    spec = batchnorm_model(seed)
    bn = next(n for n in spec.model.graph.node if n.op_type == "BatchNormalization")
    bn.attribute.append(helper.make_attribute("training_mode", 1))
    bn.output.extend(["bn.running_mean_out", "bn.running_var_out"])
    return spec


def make_trained_artifacts(folder: Path, spec: Spec, steps: int = 3, seed: int = 0,
                           with_eval: bool = True) -> Artifacts:
    """generate_artifacts (AdamW, CrossEntropy or MSE), then `steps` training steps, then save.

    `with_eval=False` builds the Module without the eval graph (for graphs ORT cannot evaluate).
    """
    folder.mkdir(parents=True, exist_ok=True)
    loss = artifacts.LossType.CrossEntropyLoss if spec.loss == "ce" else artifacts.LossType.MSELoss
    artifacts.generate_artifacts(
        spec.model, requires_grad=spec.trainable, frozen_params=spec.frozen, loss=loss,
        optimizer=artifacts.OptimType.AdamW, artifact_directory=folder, loss_input_names=[spec.loss_input],
    )
    checkpoint = folder / "checkpoint"
    state = CheckpointState.load_checkpoint(str(checkpoint))
    eval_model = str(folder / "eval_model.onnx") if with_eval else None
    module = Module(str(folder / "training_model.onnx"), state, eval_model)
    optimizer = Optimizer(str(folder / "optimizer_model.onnx"), module)
    rng = np.random.default_rng(seed)
    module.train()
    n_classes = spec.model.graph.output[0].type.tensor_type.shape.dim[1].dim_value
    for _ in range(steps):
        feeds = [v + rng.standard_normal(v.shape).astype(np.float32) * 0.1 for v in spec.inputs.values()]
        labels = rng.integers(0, n_classes, len(feeds[0])).astype(np.int64)
        module(*feeds, labels)
        optimizer.step()
        module.lazy_reset_grad()
    if with_eval:
        module.eval()
    CheckpointState.save_checkpoint(state, str(checkpoint), include_optimizer_state=True)
    return Artifacts(folder, folder / "training_model.onnx", folder / "eval_model.onnx",
                     folder / "optimizer_model.onnx", checkpoint, state, module)
