"""`onnxport deploy MODEL --target TARGET -o OUT [--shape ...] [--dim ...] [--json]` as DESIGN.md says."""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.cli import main

from ..deploy.deploy_models import conv_model, save


@pytest.fixture
def source(tmp_path):
    return save(conv_model(opset=21, ir_version=10), tmp_path / "m.onnx")


def test_deploy_ort_release_json(source, tmp_path, capsys):
    out = tmp_path / "old.onnx"
    assert main(["deploy", source, "--target", "ort-1.14", "-o", str(out), "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)["deploy"]
    assert report["target"] == "ort-1.14" and report["written"] == [str(out)] and report["check"]["passed"]
    assert "opset 21 -> 18 (onnx.version_converter)" in report["converted"]
    assert onnx.load(out).ir_version == 8


def test_deploy_mobile_with_fixed_shape_text(source, tmp_path, capsys):
    out = tmp_path / "m.ort"
    assert main(["deploy", source, "--target", "ort-mobile", "-o", str(out), "--shape", "x=1x3x16x16", "-q"]) == 0
    text = capsys.readouterr().out
    assert "wrote" in text and "input x fixed to 1x3x16x16" in text and "ORT Mobile usability: NNAPI:" in text
    assert "m.ort loaded in ONNX Runtime, matches" in text
    assert (tmp_path / "m.required_operators_and_types.config").is_file()


@pytest.mark.parametrize(("args", "words"), [
    (["--target", "ort-9.9", "-o", "{d}/o.onnx"], "unknown deploy target 'ort-9.9'"),
    (["--target", "ort-mobile", "-o", "{d}/o.onnx"], "give -o NAME.ort"),
    (["--target", "ort-1.17", "-o", "{d}/o.onnx", "--shape", "x=1x5x8x8"], "does not fit the model"),
    (["--target", "ort-1.17", "-o", "{d}/o.onnx", "--dim", "seq=4"], "no input dimension is named 'seq'"),
    (["--target", "ort-1.17", "-o", "{d}/o.onnx", "--dim", "batch=0"], "NAME=SIZE or NAME=dynamic"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(source, tmp_path, capsys, args, words):
    code = main(["deploy", source, "-q"] + [a.format(d=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_op_the_target_cannot_run_exit_2(tmp_path, capsys):
    source = save(conv_model(opset=20, extra="Gelu"), tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    out.write_bytes(b"previous")
    assert main(["deploy", source, "--target", "ort-1.14", "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "op Gelu cannot be expressed at opset 18" in err and err.count("\n") == 1
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "o.onnx"]


def test_export_with_target_deploys_beside_the_export(tmp_path, capsys):
    source = save(conv_model(opset=21, ir_version=10), tmp_path / "m.onnx")
    out = tmp_path / "out.onnx"
    code = main(["export", source, "--outputs", "probs", "-o", str(out), "--target", "ort-1.14",
                 "--dim", "batch=1", "--json", "-q"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["deploy"]["written"] == [str(tmp_path / "out.ort-1.14.onnx")]
    assert report["deploy"]["check"]["passed"] and "dimension batch fixed to 1" in report["deploy"]["converted"]
    deployed = onnx.load(tmp_path / "out.ort-1.14.onnx")
    assert deployed.opset_import[0].version == 18 and deployed.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1
    assert out.is_file()


def test_export_with_unknown_target_writes_nothing(tmp_path, capsys):
    source = save(conv_model(opset=21, ir_version=10), tmp_path / "m.onnx")
    code = main(["export", source, "--outputs", "probs", "-o", str(tmp_path / "out.onnx"), "--target", "ort-0.1", "-q"])
    assert code == 2 and "unknown deploy target" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_op_ort_mobile_cannot_run_exit_2(tmp_path, capsys):
    model = conv_model(opset=18, ir_version=8)
    relu = next(n for n in model.graph.node if n.op_type == "Relu")
    relu.op_type, relu.domain = "Swish", "com.example"  # no kernel for it in any ONNX Runtime
    model.opset_import.append(onnx.helper.make_opsetid("com.example", 1))
    source = save(model, tmp_path / "m.onnx")
    assert main(["deploy", source, "--target", "ort-mobile", "-o", str(tmp_path / "m.ort"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "ONNX Runtime cannot convert m.onnx to ORT format" in err and "Swish" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
