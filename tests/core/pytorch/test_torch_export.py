"""PyTorch -> ONNX: TorchScript and .pt2 in both modes, Hugging Face training export, errors, safety."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxport.core.cli import main as cli_main
from onnxport.core.pytorch.sources import InputSpec, parse_input_spec
from onnxport.core.util.errors import OnnxportError

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")

IMAGE = [InputSpec("image", "float32", ("batch", 1, 6, 6))]


def run(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def attrs(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def initializers(path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def test_parse_input_spec():
    spec = parse_input_spec("x:float32:batch, 3,224,224")
    assert spec == InputSpec("x", "float32", ("batch", 3, 224, 224))
    assert spec.dynamic_axes() == {0: "batch"} and spec.text() == "x:float32:batch,3,224,224"
    for bad in ("x:float32", "x:complex7:1", "x:float32:3-4", ":float32:1", "x:float32:0"):
        with pytest.raises(OnnxportError, match="input spec"):
            parse_input_spec(bad)


# ---- TorchScript ---------------------------------------------------------------------------

def test_torchscript_training_mode(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    model = builders.bn_net()
    source = builders.save_torchscript(model, tmp_path / "net.pt")
    out = tmp_path / "forward.onnx"
    result = export_torch(source, out, mode="training", inputs=IMAGE, trust_code=True)
    graph = onnx.load(out).graph
    assert result.opset == 16 and result.inputs == ["image"] and result.outputs == ["output"]
    bn = next(n for n in graph.node if n.op_type == "BatchNormalization")
    assert attrs(bn)["training_mode"] == 1 and len(bn.output) == 3
    dropout = next(n for n in graph.node if n.op_type == "Dropout")
    assert len(dropout.input) == 3  # ratio and training_mode=True
    # export_params=True, no constant folding: every parameter/buffer is an initializer, as in the state_dict
    state = {k: v.numpy() for k, v in model.state_dict().items() if v.dtype.is_floating_point}
    inits = initializers(out)
    assert set(state) <= set(inits)
    for name, value in state.items():
        np.testing.assert_array_equal(inits[name], value, err_msg=name)
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_torchscript_inference_mode(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    model = builders.bn_net()
    source = builders.save_torchscript(model, tmp_path / "net.pt")
    out = tmp_path / "model.onnx"
    result = export_torch(source, out, mode="inference", inputs=IMAGE, output_names=["logits"], trust_code=True)
    assert result.opset == 14 and result.outputs == ["logits"]
    assert result.max_abs_diff is not None and result.max_abs_diff <= 1e-5
    assert not any(n.op_type == "Dropout" for n in onnx.load(out).graph.node)
    x = torch.randn(5, 1, 6, 6)
    model.eval()
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(run(out, {"image": x.numpy()})[0], expected, atol=1e-5)


# ---- torch.export .pt2 ---------------------------------------------------------------------------

def test_pt2_inputs_come_from_the_program(tmp_path):
    from onnxport.core.pytorch.sources import describe_source

    source = builders.save_pt2(builders.ln_net(), (torch.randn(3, 8),), tmp_path / "ln.pt2")
    info = describe_source(source, trust_code=True)
    assert info.inputs_known and [s.text() for s in info.inputs] == ["input:float32:batch,8"]
    assert info.example_sizes == {"batch": 3}
    assert [p.name for p in info.parameters][:2] == ["0.weight", "0.bias"]


def test_pt2_training_mode(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    model = builders.ln_net()
    source = builders.save_pt2(model, (torch.randn(3, 8),), tmp_path / "ln.pt2", train=True)
    out = tmp_path / "forward.onnx"
    result = export_torch(source, out, mode="training", trust_code=True)
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert "Dropout" in ops and "LayerNormalization" not in ops  # opset 16 decomposes LayerNorm
    inits = initializers(out)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(inits[name], value.numpy(), err_msg=name)
    assert result.inputs == ["input"]


def test_pt2_inference_mode_from_an_eval_capture(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    model = builders.bn_net()
    source = builders.save_pt2(model, (torch.randn(3, 1, 6, 6),), tmp_path / "bn.pt2", train=False)
    out = tmp_path / "model.onnx"
    result = export_torch(source, out, mode="inference", trust_code=True)
    assert result.max_abs_diff <= 1e-5
    x = torch.randn(6, 1, 6, 6)
    with torch.no_grad():
        expected = model.eval()(x).numpy()
    np.testing.assert_allclose(run(out, {"input": x.numpy()})[0], expected, atol=1e-5)
    training = export_torch(source, tmp_path / "fw.onnx", mode="training", trust_code=True)
    assert any("captured in eval() mode" in n for n in training.notes)


def test_pt2_inference_mode_from_a_train_capture_uses_inference_form(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    model = builders.bn_net()
    source = builders.save_pt2(model, (torch.randn(3, 1, 6, 6),), tmp_path / "bn.pt2", train=True)
    out = tmp_path / "model.onnx"
    result = export_torch(source, out, mode="inference", trust_code=True)
    assert any("captured in train() mode" in n for n in result.notes) and result.max_abs_diff is None
    graph = onnx.load(out).graph
    assert not any(n.op_type == "Dropout" for n in graph.node)
    assert all(attrs(n).get("training_mode", 0) == 0 for n in graph.node if n.op_type == "BatchNormalization")
    x = torch.randn(4, 1, 6, 6)
    with torch.no_grad():
        expected = model.eval()(x).numpy()
    np.testing.assert_allclose(run(out, {"input": x.numpy()})[0], expected, atol=1e-5)


def test_pt2_with_pickled_objects_is_refused_before_loading(tmp_path):
    from onnxport.core.pytorch.export import export_torch

    source = builders.save_pt2(builders.ln_net(), (torch.randn(3, 8),), tmp_path / "ln.pt2")
    with zipfile.ZipFile(source) as zf:
        root = zf.namelist()[0].split("/")[0]
    with zipfile.ZipFile(source, "a") as zf:
        zf.writestr(f"{root}/data/constants/opaque_obj_0", b"\x80\x04N.")
    with pytest.raises(OnnxportError, match="pickled Python objects"):
        export_torch(source, tmp_path / "x.onnx", trust_code=True)
    assert not (tmp_path / "x.onnx").exists()


# ---- Hugging Face ---------------------------------------------------------------------------------

def test_hf_training_export_for_on_device_training(tmp_path):
    pytest.importorskip("transformers")
    from onnxport.core.pytorch.export import export_torch

    folder = builders.tiny_bert(tmp_path / "bert", "BertForSequenceClassification", num_labels=3)
    out = tmp_path / "forward.onnx"
    result = export_torch(folder, out, mode="training")
    assert result.task == "text-classification" and result.outputs == ["logits"]
    graph = onnx.load(out).graph
    dropouts = [n for n in graph.node if n.op_type == "Dropout"]
    assert dropouts and all(len(n.output) == 2 and len(n.input) == 3 for n in dropouts)  # eager attention
    assert not any(n.op_type == "LayerNormalization" for n in graph.node)
    import transformers

    state = transformers.BertForSequenceClassification.from_pretrained(str(folder)).state_dict()
    inits = initializers(out)
    assert "bert.encoder.layer.0.attention.self.query.weight" in inits
    for name in inits:
        if name in state:
            np.testing.assert_array_equal(inits[name], state[name].numpy(), err_msg=name)
    assert len([n for n in inits if n in state]) == len(result.parameters)


def test_hf_question_answering_from_a_classification_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    from onnxport.core.pytorch.export import export_torch

    folder = builders.tiny_bert(tmp_path / "bert", "BertForSequenceClassification", num_labels=3)
    result = export_torch(folder, tmp_path / "qa.onnx", task="question-answering")
    assert result.outputs == ["start_logits", "end_logits"] and result.max_abs_diff <= 1e-4
    assert any("randomly initialised" in n and "qa_outputs" in n for n in result.notes)


def test_hf_folders_that_need_their_own_code_are_refused(tmp_path):
    pytest.importorskip("transformers")
    from onnxport.core.pytorch.export import export_torch

    folder = builders.tiny_bert(tmp_path / "bert")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(OnnxportError, match="its own Python code"):
        export_torch(folder, tmp_path / "x.onnx")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text((folder / "config.json").read_text().replace('"auto_map"', '"x_map"'))
    with pytest.raises(OnnxportError, match="no weights"):
        export_torch(empty, tmp_path / "x.onnx")


# ---- CLI and errors ---------------------------------------------------------------------------------

def test_cli_torch_export_json(tmp_path, capsys):
    source = builders.save_torchscript(builders.bn_net(), tmp_path / "net.pt")
    out = tmp_path / "m.onnx"
    code = cli_main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--input",
                     "image:float32:batch,1,6,6", "--opset", "17", "--json", "-q", "--trust-model-code"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)["torch_export"]
    assert report["opset"] == 17 and report["inputs"] == ["image"] and report["max_abs_diff"] <= 1e-5
    assert onnx.load(out).opset_import[0].version == 17


@pytest.mark.parametrize("args, message", [
    ([], "does not record its inputs"),
    (["--input", "image:float32:batch,1,6,6", "--task", "pooling"], "Hugging Face model folders only"),
    (["--input", "image:float32:batch,1,6,6", "--opset", "7"], "opset 7"),
    (["--input", "image:float32:batch,9"], "fails on example inputs"),
])
def test_cli_errors_leave_the_output_untouched(tmp_path, capsys, args, message):
    source = builders.save_torchscript(builders.bn_net(), tmp_path / "net.pt")
    out = tmp_path / "m.onnx"
    out.write_bytes(b"precious")
    code = cli_main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "-q",
                     "--trust-model-code", *args])
    err = capsys.readouterr().err
    assert code == 2 and "onnxport: error:" in err and message in err and "Traceback" not in err
    assert out.read_bytes() == b"precious"
    assert {p.name for p in tmp_path.iterdir()} == {"net.pt", "m.onnx"}  # no temp files left


def test_not_a_torch_program(tmp_path, capsys):
    path = tmp_path / "weights.npz"
    np.savez(path, w=np.ones(2))
    assert cli_main(["torch-export", str(path), "-o", str(tmp_path / "x.onnx"), "--mode", "inference"]) == 2
    assert "not a TorchScript" in capsys.readouterr().err
