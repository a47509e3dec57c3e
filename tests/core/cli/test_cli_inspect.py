"""`onnxport inspect` on a checkpoint alone, a model + checkpoint, and a training-artifacts folder."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from onnxport.core.cli import main
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import eval_like_mlp, mlp_weights


@pytest.fixture
def artifacts_folder(tmp_path):
    folder = tmp_path / "artifacts"
    folder.mkdir()
    onnx.save(eval_like_mlp(), folder / "eval_model.onnx")
    onnx.save(eval_like_mlp(), folder / "training_model.onnx")  # stands in; must not be picked as the model
    write_checkpoint(folder / "checkpoint", mlp_weights(), frozen={"fc2.bias"}, properties={"epoch": 2},
                     optimizer={"group0": {"step": 9, "learning_rate": 1e-3, "states": {
                         "fc1.weight": {"momentum0": np.zeros((16, 8), np.float32)}}}})
    return folder


def test_checkpoint_alone(artifacts_folder, capsys):
    assert main(["inspect", str(artifacts_folder / "checkpoint"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ckpt = data["checkpoint"]
    assert ckpt["count"] == 4 and ckpt["trainable"] == 3 and ckpt["frozen"] == 1 and not ckpt["nominal"]
    assert ckpt["properties"] == {"epoch": 2}
    assert ckpt["optimizer_groups"][0]["step"] == 9
    assert "model" not in data
    assert main(["inspect", str(artifacts_folder / "checkpoint")]) == 0
    text = capsys.readouterr().out
    assert "4 tensors" in text and "optimizer group 'group0': step 9" in text and "property epoch = 2" in text


def test_folder_picks_eval_model_and_matches(artifacts_folder, capsys):
    assert main(["inspect", str(artifacts_folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["file"].endswith("eval_model.onnx")
    assert data["match"]["ok"] and data["match"]["matched"] == 4 and data["match"]["frozen"] == 1
    assert data["model"]["default_outputs"] == ["logits", "probabilities"]
    assert {o["path"].rsplit("/", 1)[-1] for o in data["not_used"]} == {"training_model.onnx"}
    assert main(["inspect", str(artifacts_folder)]) == 0
    text = capsys.readouterr().out
    assert "Forward outputs inside the graph" in text and "Match: 4 matched" in text


def test_a_crowded_folder_lists_a_few_unused_files_and_counts_the_rest(tmp_path, capsys):
    from onnx import TensorProto as T
    from onnx import helper

    from onnxport.core.cli.inspect_cmd import NOT_USED_SHOWN

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model.onnx")
    files = NOT_USED_SHOWN + 37
    for i in range(files):
        (tmp_path / f"note{i:03d}.txt").write_text("x")
    assert main(["inspect", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if line.startswith("Not used: ")]) == NOT_USED_SHOWN
    assert lines[-1] == "... and 37 more not used (--json lists every one)"
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["not_used"]
    assert sorted(o["path"].rsplit("/", 1)[-1] for o in listed) == [f"note{i:03d}.txt" for i in range(files)]
