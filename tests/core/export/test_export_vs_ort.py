"""onnxport's export against ONNX Runtime's own `Module.export_model_for_inferencing`.

Artifacts are generated and trained a few steps with onnxruntime.training; both exports must
have the same inputs and outputs, pass the ONNX checker, and give the same results (<= 1e-6).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.cli import main as cli_main
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.util.errors import OnnxportError

pytestmark = pytest.mark.training
helpers = pytest.importorskip("tests.core.ort_training_helpers")

CASES = {
    "mlp-two-outputs": (helpers.mlp_two_outputs, ["probabilities", "logits"]),
    "mlp-intermediate": (helpers.mlp_two_outputs, ["hidden"]),
    "mlp-frozen": (helpers.mlp_with_frozen, ["logits"]),
    "cnn": (helpers.small_cnn, ["logits"]),
    "cnn-feature-map": (helpers.small_cnn, ["features", "logits"]),
}


def run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [i.name for i in sess.get_inputs()], sess.run(None, feeds)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no-fold"])
def test_same_as_ort_export(tmp_path, case, fold):
    make_spec, outputs = CASES[case]
    spec = make_spec()
    arts = helpers.make_trained_artifacts(tmp_path / "artifacts", spec)
    theirs = tmp_path / "ort.onnx"
    helpers.ort_export(arts, outputs, theirs)
    ours = tmp_path / "onnxport.onnx"
    args = ["export", str(arts.eval_model), "--checkpoint", str(arts.checkpoint), "--outputs", ",".join(outputs),
            "-o", str(ours), "-q"] + ([] if fold else ["--no-fold"])
    assert cli_main(args) == 0

    ours_model, theirs_model = onnx.load(ours), onnx.load(theirs)
    onnx.checker.check_model(ours_model, full_check=True)
    assert [o.name for o in ours_model.graph.output] == [o.name for o in theirs_model.graph.output] == outputs
    assert [i.name for i in ours_model.graph.input] == [i.name for i in theirs_model.graph.input]
    if not fold:  # bit-identical weights, the graph as ORT writes it
        theirs_init = {t.name: onnx.numpy_helper.to_array(t) for t in theirs_model.graph.initializer}
        ours_init = {t.name: onnx.numpy_helper.to_array(t) for t in ours_model.graph.initializer}
        assert ours_init.keys() == theirs_init.keys()
        for name, value in theirs_init.items():
            np.testing.assert_array_equal(ours_init[name], value, err_msg=name)
    feeds = {k: v * 1.5 for k, v in spec.inputs.items()}
    our_inputs, our_results = run(ours, feeds)
    their_inputs, their_results = run(theirs, feeds)
    assert our_inputs == their_inputs
    for mine, ref in zip(our_results, their_results):
        assert np.abs(mine - ref).max() <= 1e-6


def test_trained_values_are_embedded(tmp_path):
    spec = helpers.mlp_two_outputs()
    arts = helpers.make_trained_artifacts(tmp_path / "a", spec, steps=5)
    params = read_checkpoint(arts.checkpoint)
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in spec.model.graph.initializer}
    assert any(not np.array_equal(params[n].array(), initial[n]) for n in initial), "training changed nothing?"
    theirs = helpers.ort_parameters(arts.checkpoint)
    for name in initial:
        np.testing.assert_array_equal(params[name].array(), theirs[name][0])


def test_batchnorm_model_exports_and_matches_reference(tmp_path):
    """ORT cannot always load BatchNorm eval graphs (DESIGN.md); onnxport's export must still work.

    When ORT's own export works too, the two must agree; else the result is checked against the
    eval graph run by ORT's training Module in eval mode.
    """
    spec = helpers.batchnorm_model()
    arts = helpers.make_trained_artifacts(tmp_path / "bn", spec)
    ours = tmp_path / "bn.onnx"
    assert cli_main(["export", str(arts.eval_model), "--checkpoint", str(arts.checkpoint),
                     "--outputs", "logits", "-o", str(ours), "-q"]) == 0
    onnx.checker.check_model(onnx.load(ours), full_check=True)
    _, (mine,) = run(ours, spec.inputs)
    theirs = tmp_path / "ort.onnx"
    helpers.ort_export(arts, ["logits"], theirs)
    _, (ref,) = run(theirs, spec.inputs)
    assert np.abs(mine - ref).max() <= 1e-6


def test_training_mode_batchnorm_that_ort_cannot_export(tmp_path):
    """ORT's Module refuses this eval graph; onnxport exports it, equal to the trained forward model."""
    spec = helpers.batchnorm_training_mode_model()
    arts = helpers.make_trained_artifacts(tmp_path / "bn", spec, with_eval=False)
    with pytest.raises(OnnxportError, match="should be 1 when Training_mode = False"):
        helpers.ort_export(arts, ["logits"], tmp_path / "ort.onnx")
    ours = tmp_path / "bn.onnx"
    assert cli_main(["export", str(arts.eval_model), "--checkpoint", str(arts.checkpoint),
                     "--outputs", "logits", "-o", str(ours), "-q"]) == 0
    _, (mine,) = run(ours, spec.inputs)
    # reference: the forward model in inference form with the trained weights
    reference = helpers.batchnorm_model().model
    params = read_checkpoint(arts.checkpoint)
    for t in reference.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(params[t.name].array().copy(), t.name))
    ref_path = tmp_path / "reference.onnx"
    onnx.save(reference, ref_path)
    _, (ref,) = run(ref_path, spec.inputs)
    assert np.abs(mine - ref).max() <= 1e-6
