"""A trusted .pt2 that torch cannot load ends in one line that keeps torch's reason (issue 27,
item 11): torch.export.load logs the whole traceback as a warning, then raises "check the
warnings above"; onnxport holds that log and says what it said."""

from __future__ import annotations

import pytest

from onnxport.core.cli import main as cli_main

torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")
hostile = pytest.importorskip("tests.core.trust_builders")


def test_a_trusted_pt2_naming_an_unknown_op_fails_in_one_line_with_its_reason(tmp_path, capfd):
    pt2 = builders.save_pt2(builders.ln_net(), (torch.randn(3, 8),), tmp_path / "ln.pt2")

    def unknown_op(name: str, data: bytes) -> bytes:
        return data.replace(b'"torch.ops.aten.', b'"torch.ops.aten.no_such_op_') if name == "models/model.json" else data

    source = hostile.rewrite_pt2(pt2, tmp_path / "bad.pt2", unknown_op)
    out = tmp_path / "x.onnx"
    capfd.readouterr()
    assert cli_main(["torch-export", str(source), "-o", str(out), "--mode", "inference", "--trust-model-code",
                     "-q"]) == 2
    captured = capfd.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in captured.out + captured.err and len(err.splitlines()) == 1, err[:2000]
    assert "not a loadable torch.export program (We failed to resolve torch.ops.aten.no_such_op_" in err
    assert not out.exists()
