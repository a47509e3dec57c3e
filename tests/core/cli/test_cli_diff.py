"""The CLI prints the before/after table and where the error jumps, where it prints a report."""

from __future__ import annotations

import json

import onnx

from onnxport.core.cli import main

from ..model_builders import eval_like_mlp, mlp_weights, param_set
from .test_cli_quantize import fp32  # noqa: F401 - fixture


def test_quantize_prints_the_diff_and_the_jump(fp32, tmp_path, capsys):  # noqa: F811
    q = tmp_path / "int8.onnx"
    code = main(["quantize", str(fp32), "-o", str(q), "--mode", "dynamic", "--int8-path", "avx2", "-q", "-v",
                 "--report", str(tmp_path / "r.json")])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "before/after:" in text and "MatMulInteger" in text and "int8" in text
    assert "the error jumps first" in text or "never jumps" in text
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["diff"]["after"] == str(q) and report["quantize"]["validation"]["tensors"]["tensors_compared"] > 0


def test_export_quantize_prints_the_diff(tmp_path, capsys):
    from tests.support.checkpoint_writer import write_checkpoint

    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=16), eval_path)
    ckpt = write_checkpoint(tmp_path / "checkpoint", {k: v.array() for k, v in param_set(mlp_weights()).items()})
    out = tmp_path / "model.onnx"
    code = main(["export", str(eval_path), "--checkpoint", str(ckpt), "--outputs", "logits", "-o", str(out),
                 "--quantize", "fp16", "-q", "-v"])
    text = capsys.readouterr().out
    assert code == 0, text
    table = text[text.index("before/after:"):]
    assert "model.fp16.onnx" in table and "float16" in table and "p50" in table and "logits (cosine)" in table


def test_quantize_v_has_the_latency_row(fp32, tmp_path, capsys):  # noqa: F811
    """README and the table hint promise latency in `quantize -v`'s before/after table, as `export
    --quantize -v` has it: both models are timed."""
    q = tmp_path / "int8.onnx"
    code = main(["quantize", str(fp32), "-o", str(q), "--mode", "dynamic", "--int8-path", "avx2", "-q", "-v"])
    text = capsys.readouterr().out
    assert code == 0, text
    table = text[text.index("before/after:"):]
    latency = next(line for line in table.splitlines() if line.strip().startswith("latency"))
    assert "p50 (ms)" in latency and latency.count(" ms") == 2, latency
