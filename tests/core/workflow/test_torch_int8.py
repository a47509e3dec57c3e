"""`torch-export --quantize` and the app's "Also write a dynamic int8 model" (run_import) go through
the accuracy-target quantizer `onnxport quantize` uses, and report as it does: the target, the
validation against the float32 model, and a refusal (float model kept, no int8 file) on a miss."""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.workflow.torch_import import TorchImportOptions, run_import

torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")
pytestmark = pytest.mark.torch

SPEC = "x:float32:batch,64"


@pytest.fixture
def program(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    return builders.save_torchscript(module, tmp_path / "mlp.pt")


def torch_export(program, out, *extra: str) -> int:
    return main(["torch-export", str(program), "-o", str(out), "--mode", "inference", "--input", SPEC,
                 "--trust-model-code", "--quantize", "-q", *extra])


def test_cli_quantize_reports_the_accuracy_target_like_quantize(program, tmp_path, capsys):
    out = tmp_path / "mlp.onnx"
    assert torch_export(program, out, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    quantized = report["quantize"]
    assert quantized["path"] == str(tmp_path / "mlp.int8.onnx") and quantized["mode"] == "dynamic"
    assert quantized["target"] == 0.99 and quantized["target_met"] is True and report["passed"] is True
    assert quantized["validation"]["passed"] and quantized["validation"]["outputs"][0]["cosine"] >= 0.99
    assert any(n.op_type == "MatMulInteger" for n in onnx.load(tmp_path / "mlp.int8.onnx").graph.node)
    assert torch_export(program, out) == 0
    text = capsys.readouterr().out
    assert "wrote " + str(tmp_path / "mlp.int8.onnx") in text and "validation PASSED" in text


def test_cli_no_target_quantizes_everything_and_reports_the_validation(program, tmp_path, capsys):
    assert torch_export(program, tmp_path / "mlp.onnx", "--no-target", "--json") == 0
    quantized = json.loads(capsys.readouterr().out)["quantize"]
    assert quantized["target"] is None and quantized["kept_float_nodes"] == []
    assert quantized["validation"] is not None


def test_cli_a_missed_target_writes_no_int8_model_and_says_the_float_one_was(program, tmp_path, capsys):
    out = tmp_path / "mlp.onnx"
    assert torch_export(program, out, "--target", "1.0") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"wrote {out} (float32), but no int8 model" in err[0]
    assert out.is_file() and not (tmp_path / "mlp.int8.onnx").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_target_options_need_quantize(program, tmp_path, capsys):
    assert main(["torch-export", str(program), "-o", str(tmp_path / "m.onnx"), "--mode", "inference",
                 "--input", SPEC, "--trust-model-code", "--no-target", "-q"]) == 2
    assert "--quantize" in capsys.readouterr().err


def test_the_apps_int8_option_runs_the_same_search(program, tmp_path):
    from onnxport.core.pytorch.sources import parse_input_spec

    options = TorchImportOptions(program, tmp_path / "mlp.onnx", inputs=[parse_input_spec(SPEC)], quantize=True,
                                 trust_code=True)
    result = run_import(options)
    assert result.quantized is not None and result.quantized.path == tmp_path / "mlp.int8.onnx"
    assert result.quantized.target == 0.99 and result.quantized.validation.passed
    assert any("validation PASSED" in n for n in result.notes)  # what the app's log shows
    assert result.open_paths == [tmp_path / "mlp.onnx"]


def test_a_cancel_while_quantizing_says_the_float_model_stayed(program, tmp_path):
    from onnxport.core.pytorch.sources import parse_input_spec
    from onnxport.core.util.errors import Cancelled
    from onnxport.core.util.progress import CancelToken

    cancel = CancelToken()

    def progress(fraction: float, message: str) -> None:
        if message == "loading mlp.onnx":  # the quantizer reading the export
            cancel.cancel()

    options = TorchImportOptions(program, tmp_path / "mlp.onnx", inputs=[parse_input_spec(SPEC)], quantize=True,
                                 trust_code=True)
    with pytest.raises(Cancelled, match=r"mlp\.onnx \(float32\) was written, no int8 model"):
        run_import(options, progress=progress, cancel=cancel)
    assert (tmp_path / "mlp.onnx").is_file() and not (tmp_path / "mlp.int8.onnx").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cli_quantize_validates_on_the_inputs_given(program, tmp_path, capsys):
    import numpy as np

    data = tmp_path / "inputs.npz"
    np.savez(data, x=np.random.default_rng(0).standard_normal((6, 64)).astype(np.float32))
    assert torch_export(program, tmp_path / "mlp.onnx", "--validation-inputs", str(data), "--json") == 0
    quantized = json.loads(capsys.readouterr().out)["quantize"]
    assert not any("generated" in n for n in quantized["notes"]) and quantized["validation"]["passed"]
