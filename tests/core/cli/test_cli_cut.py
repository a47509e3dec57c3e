"""`onnxport export MODEL --from T --outputs ... [--rename OLD=NEW]` (issue 39): the graph cut at new
inputs, typed from the graph; the source's inputs still needed stay and are said; refusals are one
line, exit 2, nothing written; renamed ends run at their new names."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.cli import main

from ..model_builders import forward_mlp, make_model, mlp_weights, reference_mlp


def _run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.fixture
def mlp(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(forward_mlp(mlp_weights()), path)
    return path


def test_a_cut_mlp_runs_from_its_new_input(mlp, tmp_path, capsys):
    out = tmp_path / "head.onnx"
    assert main(["export", str(mlp), "--from", "hidden", "--outputs", "probabilities", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["export"]
    assert report["inputs"] == ["hidden"] == report["new_inputs"] and report["kept_inputs"] == []
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    (hidden,) = written.graph.input
    dims = [d.dim_value or d.dim_param for d in hidden.type.tensor_type.shape.dim]
    assert hidden.type.tensor_type.elem_type == T.FLOAT and dims == ["batch", 16]  # typed from the graph
    assert json.loads({p.key: p.value for p in written.metadata_props}["onnxport.starts"]) == ["hidden"]
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    w = mlp_weights()
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    (got,) = _run(out, {"hidden": h})
    np.testing.assert_allclose(got, reference_mlp(x, w)[1], atol=1e-6)


def test_inputs_still_needed_stay_and_are_said(tmp_path, capsys):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Add", ["a", "y"], ["b"], name="add")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2]),
                               helper.make_tensor_value_info("y", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("b", T.FLOAT, [2])])
    src, out = tmp_path / "m.onnx", tmp_path / "cut.onnx"
    onnx.save(model, src)
    assert main(["export", str(src), "--from", "a", "--outputs", "b", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "new inputs a; the source's inputs y are still needed and stay" in err
    assert [i.name for i in onnx.load(out).graph.input] == ["a", "y"]
    (got,) = _run(out, {"a": np.array([1, -2], np.float32), "y": np.array([3, 4], np.float32)})
    assert got.tolist() == [4, 2]


@pytest.mark.parametrize(("args", "words"), [
    (["--from", "fc2.mm", "--outputs", "hidden"], "cannot start from 'fc2.mm': no chosen output depends on it"),
    (["--from", "hiden", "--outputs", "logits"], "unknown tensor 'hiden' to start from"),
    (["--outputs", "logits", "--rename", "nope=x"], "'nope' is not an input or output of the export"),
    (["--outputs", "logits", "--rename", "logits=hidden"], "already has a tensor named 'hidden'"),
    (["--outputs", "logits", "--rename", "logits"], "write it as OLD=NEW"),
    (["--from", "hidden", "--outputs", "logits", "--validate"], "--validate cannot check a model cut"),
])
def test_refusals_are_one_line_and_write_nothing(mlp, tmp_path, capsys, args, words):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    assert main(["export", str(mlp), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out.onnx"]


def test_renamed_ends_run_at_their_new_names(mlp, tmp_path, capsys):
    out = tmp_path / "renamed.onnx"
    assert main(["export", str(mlp), "--outputs", "logits,probabilities", "--rename", "input=pixels",
                 "--rename", "logits=scores,probabilities=probs", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["export"]
    assert report["inputs"] == ["pixels"] and report["outputs"] == ["scores", "probs"]
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["pixels"] and [o.name for o in sess.get_outputs()] == ["scores", "probs"]
    x = np.ones((2, 8), np.float32)
    scores, probs = sess.run(None, {"pixels": x})
    np.testing.assert_allclose(probs, reference_mlp(x, mlp_weights())[1], atol=1e-6)


def test_a_renamed_export_deploys_at_a_fixed_shape_and_a_wrong_dim_is_named(mlp, tmp_path, capsys):
    out = tmp_path / "fixed.onnx"
    assert main(["export", str(mlp), "--outputs", "probabilities", "--rename", "input=pixels", "-o", str(out),
                 "--target", "ort-1.17", "--shape", "pixels=4x8", "-q"]) == 0
    deployed = tmp_path / "fixed.ort-1.17.onnx"
    sess = ort.InferenceSession(str(deployed), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].name == "pixels" and sess.get_inputs()[0].shape == [4, 8]
    assert sess.run(None, {"pixels": np.ones((4, 8), np.float32)})[0].shape == (4, 4)
    capsys.readouterr()
    assert main(["export", str(mlp), "--outputs", "probabilities", "-o", str(tmp_path / "bad.onnx"),
                 "--target", "ort-1.17", "--dim", "sequence=3", "-q"]) == 2
    err = capsys.readouterr().err
    assert "no input dimension is named 'sequence'" in err and err.count("\n") == 1
    assert not (tmp_path / "bad.ort-1.17.onnx").exists()  # no deployed artifact at a dim the model lacks
