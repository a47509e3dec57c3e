"""One checkpoint policy for the CLI and the API (issue 35 items 1-2): a checkpoint that fits
nothing is refused naming the counts; one that fits partly is refused unless a partial embed is
allowed, which then lists what stayed as it was (output, report, metadata); parameter inputs left
without values are refused unless kept on purpose. The app's side: tests/gui/test_checkpoint_policy.py."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.api import export_for_inference
from onnxport.core.cli import main
from onnxport.core.params.checkpoint_fit import CheckpointFitError, UnfilledParameterInputs
from onnxport.resources import example_files
from tests.support.checkpoint_writer import write_checkpoint


def constant_weights_model(path):
    """Like the PP-OCR detector: every weight in a Constant node, no initializer, no parameter input."""
    w = onnx.numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("Constant", [], ["w"], value=w), helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def weights_model(path):
    """y = (x @ fc1.weight + fc1.bias) @ fc2.weight + fc2.bias, the weights as initializers."""
    rng = np.random.default_rng(0)
    shapes = {"fc1.weight": (4, 4), "fc1.bias": (4,), "fc2.weight": (4, 3), "fc2.bias": (3,)}
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in shapes.items()]
    nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["a"]), helper.make_node("Add", ["a", "fc1.bias"], ["b"]),
             helper.make_node("MatMul", ["b", "fc2.weight"], ["c"]), helper.make_node("Add", ["c", "fc2.bias"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def partial_checkpoint(path):
    """fc1's weights, and seven entries of another model."""
    other = {f"head.{i}.weight": np.ones((2, 2), np.float32) for i in range(7)}
    np.savez(path, **{"fc1.weight": np.ones((4, 4), np.float32), "fc1.bias": np.ones(4, np.float32), **other})
    return path


def test_cli_refuses_a_checkpoint_that_fits_nothing(tmp_path, capsys):
    model = constant_weights_model(tmp_path / "det.onnx")
    checkpoint = [p for p in example_files() if p.name == "checkpoint"][0]
    out = tmp_path / "x.onnx"
    assert main(["export", str(model), "--checkpoint", str(checkpoint), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "fits nothing in the model: 0 of 4 parameters matched, 4 unexpected" in err[0], err
    assert not out.exists()


def test_cli_refuses_a_partial_checkpoint_unless_allowed_then_lists_what_stayed(tmp_path, capsys):
    model, ckpt, out = weights_model(tmp_path / "m.onnx"), partial_checkpoint(tmp_path / "c.npz"), tmp_path / "o.onnx"
    out.write_bytes(b"keep me")
    assert main(["export", str(model), "--checkpoint", str(ckpt), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "only partly: 2 of 9 parameters matched, 7 unexpected" in err[0], err
    assert "fc2.weight and fc2.bias" in err[0] and "--allow-partial" in err[0]
    assert out.read_bytes() == b"keep me"

    assert main(["export", str(model), "--checkpoint", str(ckpt), "-o", str(out), "-q", "--allow-partial",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert "partial embed: 2 model weights kept their own values (fc2.weight, fc2.bias)" in captured.err
    partial = json.loads(captured.out)["export"]["partial"]
    assert partial["stayed"] == ["fc2.weight", "fc2.bias"] and len(partial["unused"]) == 7
    written = onnx.load(str(out))
    metadata = {p.key: p.value for p in written.metadata_props}
    assert json.loads(metadata["onnxport.partial"]) == partial
    values = {t.name: onnx.numpy_helper.to_array(t) for t in written.graph.initializer}
    assert (values["fc1.weight"] == 1).all() and not (values["fc2.weight"] == 1).all()


def test_api_holds_the_same_policy(tmp_path):
    model, ckpt = weights_model(tmp_path / "m.onnx"), partial_checkpoint(tmp_path / "c.npz")
    with pytest.raises(CheckpointFitError, match="only partly") as refused:
        export_for_inference(model, ckpt, ["y"], tmp_path / "o.onnx")
    assert refused.value.allow == "allow_partial" and not (tmp_path / "o.onnx").exists()
    result = export_for_inference(model, ckpt, ["y"], tmp_path / "o.onnx", allow_partial=True)
    assert result.partial["stayed"] == ["fc2.weight", "fc2.bias"]

    det = constant_weights_model(tmp_path / "det.onnx")
    with pytest.raises(CheckpointFitError, match="0 of 4 parameters matched, 4 unexpected"):
        export_for_inference(det, [p for p in example_files() if p.name == "checkpoint"][0], ["y"], tmp_path / "d.onnx")


def test_api_refuses_parameter_inputs_without_values_unless_kept(tmp_path):
    eval_model = [p for p in example_files() if p.suffix == ".onnx"][0]
    with pytest.raises(UnfilledParameterInputs, match="4 parameter inputs") as refused:
        export_for_inference(eval_model, None, ["logits"], tmp_path / "o.onnx")
    assert refused.value.names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert not (tmp_path / "o.onnx").exists()
    result = export_for_inference(eval_model, None, ["logits"], tmp_path / "o.onnx", keep_parameter_inputs=True)
    assert "fc1.weight" in result.inputs


def test_a_checkpoint_that_fits_whole_is_no_partial(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    model = weights_model(folder / "m.onnx")
    write_checkpoint(folder / "checkpoint", {"fc1.weight": np.ones((4, 4), np.float32)})  # replaces one, no extra
    result = export_for_inference(model, folder / "checkpoint", ["y"], tmp_path / "o.onnx")
    assert result.partial is None and "partial" not in result.to_dict()
