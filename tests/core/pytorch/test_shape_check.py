"""torch-export checks what it wrote before putting it in place: ONNX Runtime at the example shape
and at a second size of every dynamic axis it declares, held against PyTorch; output axes keep the
names of the input axes they follow."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.cli import main

torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")
pytestmark = pytest.mark.torch


def encoder_pt2(path):
    """The issue's model: a 2-layer nn.TransformerEncoder captured with dynamic batch and sequence."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}
    program = torch.export.export(encoder, (torch.randn(2, 16, 4),), dynamic_shapes=(dims,))
    torch.export.save(program, str(path))
    return path


def dims(vi) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_a_model_that_runs_only_at_the_traced_shape_is_refused(tmp_path, capsys):
    source = encoder_pt2(tmp_path / "enc.pt2")
    out = tmp_path / "enc.onnx"
    out.write_bytes(b"precious")
    assert main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--trust-model-code",
                 "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "declares dynamic axes it does not take" in err[0], err
    assert "batch = 2" in err[0] and "= 16" in err[0]  # the axes, at the sizes it was traced with
    assert "Reshape '" in err[0] and "fixed target shape" in err[0]  # the op that baked them
    assert "--input src:float32:2,16,4" in err[0]  # how to write it with those sizes fixed
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc.onnx", "enc.pt2"]  # no temp left

    # the hint's fixed sizes write a model that is what it declares
    assert main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--trust-model-code",
                 "--input", "src:float32:2,16,4", "-q"]) == 0
    model = onnx.load(out)
    assert dims(model.graph.input[0]) == [2, 16, 4] and dims(model.graph.output[0]) == [2, 16, 4]


class SizedOutputs(torch.nn.Module):
    """Outputs whose shapes the exporter cannot follow from the input's names (made from sizes)."""

    def forward(self, x):
        b, s = x.size(0), x.size(1)
        return torch.zeros(b, s) + x.sum(2), x.permute(1, 0, 2).reshape(s, b * 4)


def test_output_axes_keep_the_input_axes_names(tmp_path):
    source = builders.save_torchscript(SizedOutputs(), tmp_path / "sized.pt")
    out = tmp_path / "sized.onnx"
    assert main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--trust-model-code",
                 "--input", "x:float32:batch,seq,4", "--output-names", "scores,flat", "-q"]) == 0
    model = onnx.load(out)
    assert dims(model.graph.output[0]) == ["batch", "seq"]
    assert dims(model.graph.output[1])[0] == "seq"  # not "batch", though both were traced at size 2
    assert dims(model.graph.output[1])[1] not in ("batch", "seq")  # 4 x batch: left to the exporter
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    scores, flat = session.run(None, {"x": np.ones((5, 7, 4), np.float32)})
    assert scores.shape == (5, 7) and flat.shape == (7, 20)


class Pairs(torch.nn.Module):
    """Takes only an even sequence length: tokens are paired."""

    def forward(self, x):
        return x.reshape(x.size(0), x.size(1) // 2, 8)


def test_an_axis_that_takes_only_some_sizes_is_checked_at_one_pytorch_takes(tmp_path):
    source = builders.save_torchscript(Pairs(), tmp_path / "pairs.pt")
    out = tmp_path / "pairs.onnx"
    assert main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--trust-model-code",
                 "--input", "x:float32:batch,seq,4", "-q"]) == 0
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.ones((3, 6, 4), np.float32)})[0].shape == (3, 3, 8)
