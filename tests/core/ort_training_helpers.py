"""Build ONNX Runtime training artifacts with ORT's own training API, train a few steps, save.

ORT's training API (onnxruntime-training 1.19.2) lives in the training environment, reached
through `onnxport.core.training` (a child process started once per test session). Shared by the
tests that compare onnxport against it: import it with
`helpers = pytest.importorskip("tests.core.ort_training_helpers")`; it skips the importing module
where no training environment exists, with the reason, and fails instead when
`ONNXPORT_REQUIRE_TRAINING=1` (set by `make test` where the Makefile built the environment), so
CI cannot silently skip them. Every model is built with onnx.helper (no torch) and is small
enough that generate_artifacts + a few training steps take well under a second.

Models (each returns a `Spec`: the forward model, trainable/frozen parameter names, the output
the loss reads, example feeds, the outputs an inference model keeps):
- `mlp_two_outputs()`: Gemm-Relu-Gemm -> `logits`, Softmax -> `probabilities`; intermediate `hidden`.
- `mlp_with_frozen()`: the same MLP, first layer frozen.
- `small_cnn()`: Conv-Relu-MaxPool-Conv-Relu-GlobalAveragePool-Flatten-Gemm; intermediates
  `features_map` (N,8,4,4) and `features` (N,8).
- `batchnorm_model()`: Conv-BatchNormalization(inference form)-Relu-pool-Gemm, running stats frozen.
- `batchnorm_training_mode_model()`: BatchNorm with training_mode=1 and 3 outputs, as a torch
  training-mode export writes it; ORT's eval graph for it does not load (DESIGN.md pitfall), so
  train it with `with_eval=False`.
- `embedding_classifier()`: encoder Gemm-Tanh -> `embedding` (the useful intermediate), head
  Gemm -> `logits`.
- `regression_mlp()`: an MLP regressor trained with MSELoss on `prediction`.

Typical use:
    arts = make_trained_artifacts(tmp_path / "a", mlp_with_frozen(), properties={"epoch": 3})
    arts.eval_model, arts.checkpoint       # paths
    ort_export(arts, ["logits"], out)      # ORT's own export_model_for_inferencing
    ort_parameters(arts.checkpoint)        # {name: (values, requires_grad)} as ORT loads them
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.training.environment import HOW_TO_GET, find_training_python
from onnxport.core.training.process import TrainingProcess
from tests.support.ort_api import (
    TrainingFiles,
    read_ort_checkpoint,
    train_steps,
)
from tests.support.ort_api import (
    ort_export as _ort_export,
)

if find_training_python() is None:
    if os.environ.get("ONNXPORT_REQUIRE_TRAINING") == "1":
        raise RuntimeError(f"ONNXPORT_REQUIRE_TRAINING=1 but no training environment: {HOW_TO_GET}")
    pytest.skip(f"no training environment (onnxruntime-training 1.19.2): {HOW_TO_GET}", allow_module_level=True)

_PROCESS: TrainingProcess | None = None


def training_process() -> TrainingProcess:
    """The test session's one child in the training environment (started on first use)."""
    global _PROCESS
    if _PROCESS is None:
        _PROCESS = TrainingProcess()
        atexit.register(_PROCESS.close)
    return _PROCESS


OPSET = 17
BATCH = 4

__all__ = [
    "Artifacts", "Spec", "TrainingFiles", "batchnorm_model", "batchnorm_training_mode_model", "embedding_classifier",
    "make_nominal_checkpoint", "make_trained_artifacts", "mlp_two_outputs", "mlp_with_frozen", "ort_export",
    "ort_parameters", "regression_mlp", "small_cnn", "train_steps", "training_process",
]


@dataclass
class Spec:
    """A forward model plus what training it needs."""

    model: onnx.ModelProto
    trainable: list[str]
    frozen: list[str]
    loss_input: str  # the forward output the loss reads
    inputs: dict[str, np.ndarray]  # example feeds (batch of 4)
    outputs: list[str]  # forward outputs an inference model keeps
    loss: str = "ce"  # "ce" (CrossEntropy over int64 class labels) or "mse" (float targets)


@dataclass
class Artifacts:
    """What `make_trained_artifacts` produced: paths (ORT's state lives in the checkpoint file)."""

    folder: Path
    training_model: Path
    eval_model: Path
    optimizer_model: Path
    checkpoint: Path
    with_eval: bool = True
    steps: int = 0
    properties: dict = field(default_factory=dict)

    @property
    def files(self) -> TrainingFiles:
        return TrainingFiles(self.training_model, self.optimizer_model, self.eval_model if self.with_eval else None)


def _init(rng, name: str, shape: tuple[int, ...], scale: float = 0.5) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "forward", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    return model


def _feeds(rng, **shapes) -> dict[str, np.ndarray]:
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


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
    return Spec(model, [t.name for t in inits], [], "logits", _feeds(rng, input=(BATCH, 8)),
                ["logits", "probabilities"])


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
    return Spec(model, [t.name for t in inits], [], "logits", _feeds(rng, image=(BATCH, 1, 8, 8)), ["logits"])


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
                _feeds(rng, image=(BATCH, 1, 6, 6)), ["logits"])


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


def embedding_classifier(seed: int = 4) -> Spec:
    """Encoder Gemm -> Tanh -> `embedding` (N,6), head Gemm -> `logits` (N,3).

    `embedding` is the intermediate an inference model would expose (e.g. for similarity search);
    the encoder is frozen, so it mixes frozen and trainable parameters on the way to `logits`.
    """
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Gemm", ["features", "encoder.weight", "encoder.bias"], ["encoded"], name="/encoder/Gemm",
                         transB=1),
        helper.make_node("Tanh", ["encoded"], ["embedding"], name="/encoder/Tanh"),
        helper.make_node("Gemm", ["embedding", "head.weight", "head.bias"], ["logits"], name="/head/Gemm", transB=1),
    ]
    inits = [_init(rng, "encoder.weight", (6, 10)), _init(rng, "encoder.bias", (6,)),
             _init(rng, "head.weight", (3, 6)), _init(rng, "head.bias", (3,))]
    model = _model(nodes, [helper.make_tensor_value_info("features", T.FLOAT, ["batch", 10])],
                   [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 3])], inits)
    return Spec(model, ["head.weight", "head.bias"], ["encoder.weight", "encoder.bias"], "logits",
                _feeds(rng, features=(BATCH, 10)), ["embedding", "logits"])


def regression_mlp(seed: int = 5) -> Spec:
    """Gemm -> Sigmoid -> Gemm -> `prediction` (N,2), trained with MSELoss on float targets."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Gemm", ["x", "l1.weight", "l1.bias"], ["h"], name="/l1/Gemm", transB=1),
        helper.make_node("Sigmoid", ["h"], ["hidden"], name="/l1/Sigmoid"),
        helper.make_node("Gemm", ["hidden", "l2.weight", "l2.bias"], ["prediction"], name="/l2/Gemm", transB=1),
    ]
    inits = [_init(rng, "l1.weight", (5, 3)), _init(rng, "l1.bias", (5,)),
             _init(rng, "l2.weight", (2, 5)), _init(rng, "l2.bias", (2,))]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 3])],
                   [helper.make_tensor_value_info("prediction", T.FLOAT, ["batch", 2])], inits)
    return Spec(model, [t.name for t in inits], [], "prediction", _feeds(rng, x=(BATCH, 3)), ["prediction"],
                loss="mse")


def _generate(folder: Path, spec: Spec, nominal: bool = False, optimizer: bool = True) -> None:
    """ORT's generate_artifacts on the spec's forward graph as it is (no onnxport repairs)."""
    folder.mkdir(parents=True, exist_ok=True)
    forward = folder / "forward.onnx"
    onnx.save(spec.model, forward)
    training_process().call("artifacts", {
        "forward": str(forward), "out_dir": str(folder), "requires_grad": spec.trainable, "frozen": spec.frozen,
        "loss": "CrossEntropyLoss" if spec.loss == "ce" else "MSELoss", "optimizer": "AdamW" if optimizer else None,
        "loss_input": spec.loss_input, "nominal": nominal})


def _labels(spec: Spec, rng: np.random.Generator) -> np.ndarray:
    out = next(o for o in spec.model.graph.output if o.name == spec.loss_input)
    width = out.type.tensor_type.shape.dim[1].dim_value
    if spec.loss == "mse":
        return rng.standard_normal((BATCH, width)).astype(np.float32)
    return rng.integers(0, width, BATCH).astype(np.int64)


def make_trained_artifacts(folder: Path, spec: Spec, steps: int = 3, seed: int = 0, with_eval: bool = True,
                           properties: dict | None = None) -> Artifacts:
    """generate_artifacts (AdamW; CrossEntropy or MSE), train `steps` steps, save the checkpoint.

    The checkpoint (`folder/checkpoint`) is saved with its optimizer state (group `group0`: step,
    learning rate, momentum0/momentum1 per trainable parameter) and `properties` (int / float /
    str, set through `state.properties[...]`). `with_eval=False` builds the Module without the
    eval graph (for graphs ORT cannot evaluate); `eval_model` is still written.
    """
    _generate(folder, spec)
    checkpoint = folder / "checkpoint"
    arts = Artifacts(folder, folder / "training_model.onnx", folder / "eval_model.onnx",
                     folder / "optimizer_model.onnx", checkpoint, with_eval, steps, dict(properties or {}))
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(steps):
        feeds = [v + rng.standard_normal(v.shape).astype(np.float32) * 0.1 for v in spec.inputs.values()]
        batches.append([*feeds, _labels(spec, rng)])
    train_steps(training_process(), arts.files, checkpoint, batches, checkpoint, properties=properties)
    return arts


def make_nominal_checkpoint(folder: Path, spec: Spec) -> Path:
    """generate_artifacts(..., nominal_checkpoint=True) (no optimizer); the nominal file's path.

    ORT writes both `checkpoint` (full) and `nominal_checkpoint` (names and types only; its
    tensors have dims [] and no data, and ORT refuses to hand out their values).
    """
    _generate(folder, spec, nominal=True, optimizer=False)
    return folder / "nominal_checkpoint"


def ort_parameters(checkpoint: Path) -> dict[str, tuple[np.ndarray, bool]]:
    """{name: (values, requires_grad)} as ORT's CheckpointState.load_checkpoint sees them."""
    state = read_ort_checkpoint(training_process(), checkpoint)
    return {name: (state.values[name], state.requires_grad[name]) for name in state.requires_grad}


def ort_checkpoint(checkpoint: Path):
    """The whole `OrtCheckpoint` (properties, a nominal checkpoint's refusal...)."""
    return read_ort_checkpoint(training_process(), checkpoint)


def ort_export(arts: Artifacts, outputs: list[str], out: Path, checkpoint: Path | None = None) -> Path:
    """ORT's own Module.export_model_for_inferencing of the trained state (its Module always
    loads the eval graph for that: `OnnxportError` with ORT's message where it cannot)."""
    files = TrainingFiles(arts.training_model, arts.optimizer_model, arts.eval_model)
    return _ort_export(training_process(), files, checkpoint or arts.checkpoint, outputs, out)
