"""The whole on-device training chain, for real: PyTorch -> training-mode ONNX -> ORT training
artifacts -> a few AdamW steps in onnxruntime.training -> onnxport's inference export.

Each test exports with `onnxport.core.pytorch.export` (training mode) in onnxport's environment,
builds the artifacts with `onnxport.core.training.artifacts.generate_training_artifacts` and trains with
ORT's own `Module`/`Optimizer` in the training environment (across `onnxport.core.training`'s
process boundary), saves the checkpoint, and then holds onnxport's export (eval graph + saved checkpoint) against
ONNX Runtime's own `Module.export_model_for_inferencing`: same inputs and outputs, a model the
ONNX checker accepts, and results equal to <= 1e-6 on the same feeds. Where PyTorch can run the
same trained weights, the export is also checked against the PyTorch model in eval mode (<= 1e-5:
two runtimes' float kernels). Every test also checks that training changed the trainable weights
and left the frozen ones alone, so a chain that silently exported the initial weights fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxport.core.api import export_for_inference
from onnxport.core.export.export import export_model
from onnxport.core.export.options import ExportOptions
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.io.readers import read_parameters
from onnxport.core.pytorch.export import export_torch
from onnxport.core.pytorch.sources import InputSpec
from onnxport.core.training.artifacts import ArtifactsResult, generate_training_artifacts
from tests.support.ort_api import TrainingFiles, ort_export, train_steps

pytestmark = [pytest.mark.training, pytest.mark.torch]
helpers = pytest.importorskip("tests.core.ort_training_helpers")
torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")

ORT_TOLERANCE = 1e-6  # onnxport vs ORT's own export: same graph, same weights, same runtime
TORCH_TOLERANCE = 1e-5  # onnxport's export in ORT vs PyTorch eval(): different float kernels
STEPS = 4
IMAGE = [InputSpec("image", "float32", ("batch", 1, 6, 6))]
FEATURES = [InputSpec("input", "float32", ("batch", 8))]
STATISTICS = ("1.running_mean", "1.running_var")  # bn_net's BatchNorm2d buffers
POOLED = "/bert/pooler/activation/Tanh_output_0"  # BertPooler's tanh: the sentence embedding

Feeds = Callable[[np.random.Generator], list[np.ndarray]]


def image_feeds(rng: np.random.Generator) -> list[np.ndarray]:
    return [(rng.standard_normal((4, 1, 6, 6)) * 2 + 0.5).astype(np.float32)]


def feature_feeds(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal((4, 8)).astype(np.float32)]


def text_feeds(rng: np.random.Generator) -> list[np.ndarray]:
    """input_ids, attention_mask (padded tails), token_type_ids (two segments): batch 3 x 8."""
    ids = rng.integers(5, builders.VOCAB, (3, 8)).astype(np.int64)
    mask = np.ones((3, 8), np.int64)
    mask[1, 6:] = mask[2, 4:] = 0
    segments = np.zeros((3, 8), np.int64)
    segments[:, 5:] = 1
    return [ids, mask, segments]


@dataclass
class Trained:
    """One run of the chain: the artifacts, the saved trained checkpoint."""

    forward: Path
    artifacts: ArtifactsResult
    checkpoint: Path
    initial: dict[str, np.ndarray]  # the forward graph's initializers before training

    @property
    def files(self) -> TrainingFiles:
        return TrainingFiles(self.artifacts.training_model, self.artifacts.optimizer_model,
                             self.artifacts.eval_model)


def train_chain(tmp_path: Path, source: Path, feeds: Feeds, *, inputs: list[InputSpec] | None = None,
                opset: int | None = None, frozen: list[str] | None = None, classes: int = 3) -> Trained:
    """torch_export (training) -> generate_training_artifacts -> STEPS AdamW steps -> save_checkpoint.

    The Module is built with the eval graph, as a training app would, so ORT must load the eval
    graph onnxport repaired; it is left in eval mode for `export_model_for_inferencing`.
    """
    forward = tmp_path / "forward.onnx"
    export_torch(source, forward, mode="training", inputs=inputs, opset=opset, trust_code=True)
    arts = generate_training_artifacts(forward, tmp_path / "artifacts", frozen=frozen,
                                       training=helpers.training_process())
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(STEPS):
        batch = feeds(rng)
        batches.append([*batch, rng.integers(0, classes, batch[0].shape[0]).astype(np.int64)])
    checkpoint = tmp_path / "trained_checkpoint"
    files = TrainingFiles(arts.training_model, arts.optimizer_model, arts.eval_model)
    losses = train_steps(helpers.training_process(), files, arts.checkpoint, batches, checkpoint,
                         include_optimizer_state=False)
    assert len(losses) == STEPS and all(np.isfinite(losses))
    initial = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(forward)).graph.initializer}
    return Trained(forward, arts, checkpoint, initial)


def assert_trained(run: Trained, updated: tuple[str, ...] = ()) -> ParameterSet:
    """Trainable weights (and the frozen `updated` ones: running statistics) moved, the other
    frozen ones did not, and the saved file holds what ORT's state holds."""
    params = read_parameters(run.checkpoint)
    assert sorted(params.trainable) == sorted(run.artifacts.trainable)
    assert sorted(params.frozen) == sorted(run.artifacts.frozen)
    theirs = helpers.ort_parameters(run.checkpoint)
    for name in params:
        value = params[name].array()
        np.testing.assert_array_equal(value, theirs[name][0], err_msg=name)
        if name in run.artifacts.trainable or name in updated:
            assert not np.array_equal(value, run.initial[name]), f"training left {name} unchanged"
        else:
            np.testing.assert_array_equal(value, run.initial[name], err_msg=f"frozen {name} moved")
    return params


def export_both(run: Trained, outputs: list[str], folder: Path) -> tuple[Path, Path]:
    """onnxport's export_for_inference and ORT's export_model_for_inferencing of the same state."""
    folder.mkdir(exist_ok=True)
    ours, theirs = folder / "onnxport.onnx", folder / "ort.onnx"
    result = export_for_inference(run.artifacts.eval_model, run.checkpoint, outputs, ours)
    assert result.outputs == outputs
    ort_export(helpers.training_process(), run.files, run.checkpoint, outputs, theirs)
    return ours, theirs


def session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def assert_same_as_ort(ours: Path, theirs: Path, feeds: list[np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Same input/output names, checker-valid, results within ORT_TOLERANCE; returns ours."""
    ours_model, theirs_model = onnx.load(str(ours)), onnx.load(str(theirs))
    onnx.checker.check_model(ours_model, full_check=True)
    assert [o.name for o in ours_model.graph.output] == [o.name for o in theirs_model.graph.output] == outputs
    ours_session, theirs_session = session(ours), session(theirs)
    names = [i.name for i in ours_session.get_inputs()]
    assert names == [i.name for i in theirs_session.get_inputs()]
    assert [i.name for i in ours_model.graph.input] == [i.name for i in theirs_model.graph.input]
    fed = dict(zip(names, feeds))
    mine, reference = ours_session.run(None, fed), theirs_session.run(None, fed)
    for name, got, want in zip(outputs, mine, reference):
        assert got.shape == want.shape, name
        assert float(np.abs(got - want).max()) <= ORT_TOLERANCE, name
    return mine


def torch_reference(model: torch.nn.Module, params: ParameterSet, feeds: list[np.ndarray]) -> np.ndarray:
    """`model` in eval mode with the trained checkpoint's tensors loaded by state_dict name."""
    state = {name: torch.from_numpy(params[name].array().copy()) for name in params}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(k.endswith("num_batches_tracked") for k in missing), (missing, unexpected)
    with torch.no_grad():
        return model.eval()(*(torch.from_numpy(f) for f in feeds)).numpy()


def save_source(kind: str, model: torch.nn.Module, example: torch.Tensor, path: Path) -> Path:
    """A TorchScript `.pt` or a `.pt2` captured in train() mode (training-form Dropout/BatchNorm)."""
    if kind == "torchscript":
        return builders.save_torchscript(model, path.with_suffix(".pt"))
    return builders.save_pt2(model, (example,), path.with_suffix(".pt2"), train=True)


# ---- 1. TorchScript and torch.export programs ------------------------------------------------------

@pytest.mark.parametrize("kind", ["torchscript", "pt2"])
def test_torch_program_trained_export_equals_ort(tmp_path, kind):
    """ln_net at onnxport's training default (opset 16, LayerNorm decomposed), through the chain.

    Also through `export_model` with fold=False (the graph as ORT writes it): every parameter is
    embedded bitwise as in ORT's export and the trained checkpoint.
    """
    source = save_source(kind, builders.ln_net(), torch.randn(3, 8), tmp_path / "ln")
    run = train_chain(tmp_path, source, feature_feeds, inputs=FEATURES if kind == "torchscript" else None)
    assert run.artifacts.frozen == [] and len(run.artifacts.trainable) == 6
    params = assert_trained(run)
    ours, theirs = export_both(run, ["output"], tmp_path / "export")
    feeds = feature_feeds(np.random.default_rng(7))
    assert_same_as_ort(ours, theirs, feeds, ["output"])

    unfolded = tmp_path / "export" / "unfolded.onnx"
    export_model(run.artifacts.eval_model, unfolded, ["output"], params, options=ExportOptions(fold=False))
    assert_same_as_ort(unfolded, theirs, feeds, ["output"])
    mine = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(unfolded)).graph.initializer}
    reference = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(theirs)).graph.initializer}
    assert set(mine) == set(params) <= set(reference)  # ORT also turns Constant nodes into initializers
    for name in params:
        np.testing.assert_array_equal(mine[name], reference[name], err_msg=name)
        np.testing.assert_array_equal(mine[name], params[name].array(), err_msg=name)


# ---- 2. BatchNorm and LayerNorm -------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["torchscript", "pt2"])
def test_batchnorm_trained_export_equals_ort_and_pytorch(tmp_path, kind):
    """Training-form BatchNorm (training_mode=1, three outputs) through the whole chain.

    ORT writes an eval graph for it that ORT itself cannot load ("number of op outputs should be 1
    when Training_mode = False"); `repair_eval` puts it in inference form, so here ORT's Module
    loads the eval graph and ORT's own export runs: onnxport must equal it (<= 1e-6). As an
    independent check the export is also compared with PyTorch's bn_net in eval mode holding the
    trained weights read back with `read_parameters` (<= 1e-5), running statistics included: they
    are frozen, yet ORT's training steps update them (see the next test), so they must have moved.
    """
    source = save_source(kind, builders.bn_net(), torch.randn(3, 1, 6, 6), tmp_path / "bn")
    run = train_chain(tmp_path, source, image_feeds, inputs=IMAGE if kind == "torchscript" else None)
    assert any("eval graph BatchNormalization in inference form" in r for r in run.artifacts.repairs)
    assert tuple(sorted(run.artifacts.frozen)) == STATISTICS
    assert any("running statistics" in n and "updates them" in n for n in run.artifacts.notes)
    params = assert_trained(run, updated=STATISTICS)
    output = onnx.load(str(run.forward)).graph.output[0].name
    ours, theirs = export_both(run, [output], tmp_path / "export")
    graph = onnx.load(str(ours)).graph
    assert not any(n.op_type == "Dropout" for n in graph.node)
    assert all(len(n.output) == 1 for n in graph.node if n.op_type == "BatchNormalization")
    feeds = image_feeds(np.random.default_rng(7))
    (mine,) = assert_same_as_ort(ours, theirs, feeds, [output])
    expected = torch_reference(builders.bn_net(), params, feeds)
    assert float(np.abs(mine - expected).max()) <= TORCH_TOLERANCE


def test_batchnorm_running_statistics_follow_pytorch_train_mode(tmp_path):
    """Backs the artifacts note: with the learning rate at 0 (weights fixed), four ORT training
    steps move the running statistics exactly as four PyTorch train() forwards do, except that
    the running variance uses the biased batch variance (PyTorch: unbiased)."""
    model = builders.bn_net()
    source = builders.save_torchscript(model, tmp_path / "bn.pt")
    export_torch(source, tmp_path / "forward.onnx", mode="training", inputs=IMAGE, trust_code=True)
    arts = generate_training_artifacts(tmp_path / "forward.onnx", tmp_path / "artifacts",
                                       training=helpers.training_process())
    bn = model[1]
    momentum = bn.momentum
    biased_var = bn.running_var.numpy().copy()
    rng = np.random.default_rng(3)
    batches = []
    for _ in range(STEPS):
        (images,) = image_feeds(rng)
        batches.append([images, rng.integers(0, 3, 4).astype(np.int64)])
    files = TrainingFiles(arts.training_model, arts.optimizer_model, arts.eval_model)
    trained = tmp_path / "trained"
    train_steps(helpers.training_process(), files, arts.checkpoint, batches, trained, learning_rate=0.0)
    model.train()
    for images, _ in batches:
        with torch.no_grad():
            conv = model[0](torch.from_numpy(images)).numpy()
            model(torch.from_numpy(images))
        biased_var = (1 - momentum) * biased_var + momentum * conv.var(axis=(0, 2, 3))
    state = helpers.ort_parameters(trained)
    running_mean, running_var = state["1.running_mean"][0], state["1.running_var"][0]
    np.testing.assert_allclose(running_mean, bn.running_mean.numpy(), atol=1e-6)
    np.testing.assert_allclose(running_var, biased_var, atol=1e-5)
    assert np.abs(running_var - bn.running_var.numpy()).max() > 1e-4  # not PyTorch's unbiased update


@pytest.mark.parametrize("opset", [17, 20], ids=["opset17", "torch-default-opset20"])
def test_fused_layernorm_trained_export_equals_ort_and_pytorch(tmp_path, opset):
    """LayerNormalization as one op (opset >= 17; 20 is torch 2.13's own default) breaks ORT's
    gradient builder unless `repair_forward` adds its Mean/InvStdDev outputs; with the repair
    the chain trains and exports, equal to ORT's export and to PyTorch's ln_net in eval mode."""
    source = save_source("pt2", builders.ln_net(), torch.randn(3, 8), tmp_path / "ln")
    run = train_chain(tmp_path, source, feature_feeds, opset=opset)
    assert any(n.op_type == "LayerNormalization" for n in onnx.load(str(run.forward)).graph.node)
    assert any("LayerNormalization given its Mean/InvStdDev" in r for r in run.artifacts.repairs)
    params = assert_trained(run)
    ours, theirs = export_both(run, ["output"], tmp_path / "export")
    assert onnx.load(str(ours)).opset_import[0].version == opset
    feeds = feature_feeds(np.random.default_rng(7))
    (mine,) = assert_same_as_ort(ours, theirs, feeds, ["output"])
    expected = torch_reference(builders.ln_net(), params, feeds)
    assert float(np.abs(mine - expected).max()) <= TORCH_TOLERANCE


# ---- 3. BERT-style, embeddings frozen ---------------------------------------------------------------

def test_bert_frozen_embeddings_trained_export_equals_ort(tmp_path):
    """A tiny BertForSequenceClassification, embeddings frozen by an fnmatch pattern, 4 steps.

    Exported twice, by onnxport and by ORT: the pooled embedding (an intermediate tensor, the
    pooler's tanh) with the logits, then the pooled embedding alone, which must drop the
    classifier and the labels input. The logits are also checked against the Hugging Face model
    in eval mode loaded with the trained weights (<= 1e-5).
    """
    pytest.importorskip("transformers")
    import transformers

    folder = builders.tiny_bert(tmp_path / "bert", "BertForSequenceClassification", num_labels=3)
    run = train_chain(tmp_path, folder, text_feeds, frozen=["bert.embeddings.*"])
    frozen = run.artifacts.frozen
    assert frozen and all(n.startswith("bert.embeddings.") for n in frozen)
    assert "bert.embeddings.word_embeddings.weight" in frozen and "classifier.weight" in run.artifacts.trainable
    params = assert_trained(run)
    feeds = text_feeds(np.random.default_rng(7))

    both = [POOLED, "logits"]
    ours, theirs = export_both(run, both, tmp_path / "both")
    pooled, logits = assert_same_as_ort(ours, theirs, feeds, both)
    assert pooled.shape == (3, 32) and logits.shape == (3, 3)
    assert [i.name for i in onnx.load(str(ours)).graph.input] == ["input_ids", "attention_mask", "token_type_ids"]

    ours_pooled, theirs_pooled = export_both(run, [POOLED], tmp_path / "pooled")
    (only,) = assert_same_as_ort(ours_pooled, theirs_pooled, feeds, [POOLED])
    np.testing.assert_array_equal(only, pooled)
    kept = {t.name for t in onnx.load(str(ours_pooled)).graph.initializer}
    assert "bert.pooler.dense.weight" in kept and not {"classifier.weight", "classifier.bias"} & kept

    model = transformers.BertForSequenceClassification.from_pretrained(str(folder), attn_implementation="eager")
    state = {name: torch.from_numpy(params[name].array().copy()) for name in params}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and not [k for k in missing if not k.endswith("position_ids")], missing
    with torch.no_grad():
        expected = model.eval()(*(torch.from_numpy(f) for f in feeds)).logits.numpy()
    assert float(np.abs(logits - expected).max()) <= TORCH_TOLERANCE
