"""Our checkpoint reader and writer against ONNX Runtime's own CheckpointState."""

from __future__ import annotations

import numpy as np
import pytest

from onnxport.core.checkpoint import read_checkpoint
from onnxport.core.checkpoint_writer import write_checkpoint

pytestmark = pytest.mark.training
helpers = pytest.importorskip("tests.core.ort_training_helpers")


def test_reader_equals_ort_after_training(tmp_path):
    spec = helpers.mlp_with_frozen()
    arts = helpers.make_trained_artifacts(tmp_path / "a", spec, steps=4)
    arts.state.properties["epoch"] = 4
    arts.state.properties["best_loss"] = 0.5
    arts.state.properties["run"] = "nightly"
    helpers.CheckpointState.save_checkpoint(arts.state, str(arts.checkpoint), include_optimizer_state=True)
    params = read_checkpoint(arts.checkpoint)
    ort_state = helpers.CheckpointState.load_checkpoint(str(arts.checkpoint))
    for name in spec.trainable + spec.frozen:
        np.testing.assert_array_equal(params[name].array(), np.asarray(ort_state.parameters[name].data))
        assert params[name].trainable == ort_state.parameters[name].requires_grad
    assert sorted(params.frozen) == sorted(spec.frozen)
    assert params.properties == {"epoch": 4, "best_loss": 0.5, "run": "nightly"}
    (group,) = params.optimizer_groups
    assert group.step == 4 and sorted(group.states) == sorted(spec.trainable)
    assert set(group.states["fc2.weight"]) == {"momentum0", "momentum1"}


def test_ort_nominal_checkpoint_is_detected(tmp_path):
    spec = helpers.mlp_two_outputs()
    helpers.artifacts.generate_artifacts(spec.model, requires_grad=spec.trainable, loss=helpers.artifacts.LossType
                                         .CrossEntropyLoss, artifact_directory=tmp_path, nominal_checkpoint=True,
                                         loss_input_names=["logits"])
    params = read_checkpoint(tmp_path / "nominal_checkpoint")
    assert params.nominal and sorted(params) == sorted(spec.trainable)


@pytest.mark.parametrize("external", [False, True])
def test_ort_loads_what_we_write(tmp_path, external):
    rng = np.random.default_rng(0)
    arrays = {"a.weight": rng.standard_normal((5, 3)).astype(np.float32), "a.bias": np.arange(5, dtype=np.float32),
              "steps": np.array([3], np.int64)}
    path = tmp_path / "checkpoint"
    write_checkpoint(path, arrays, frozen={"a.bias"}, external_data=external, properties={"tag": "x", "n": 2})
    state = helpers.CheckpointState.load_checkpoint(str(path))
    for name, value in arrays.items():
        np.testing.assert_array_equal(np.asarray(state.parameters[name].data), value)
    assert state.parameters["a.bias"].requires_grad is False
    assert state.properties["tag"] == "x" and state.properties["n"] == 2
    write_checkpoint(tmp_path / "nominal", arrays, nominal=True)
    helpers.CheckpointState.load_checkpoint(str(tmp_path / "nominal"))  # ORT accepts our nominal file
