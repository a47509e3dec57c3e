"""`export --quantize/--validate` in the core: export, validate against eval graph + checkpoint,
quantize with the accuracy target, benchmark, and one report next to the export."""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.evaluate.runtime import precision_of
from onnxport.core.export.export import export_model
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken
from onnxport.core.workflow.post_export import post_export, quantized_path, report_path_for
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import decisive_mlp_weights, eval_like_mlp, mlp_weights
from ..quant_models import save

HIDDEN = 256  # weights big enough that int8 makes the model smaller (a quantization gaining nothing fails)


@pytest.fixture
def exported(tmp_path):
    eval_path = save(eval_like_mlp(d_hidden=HIDDEN), tmp_path / "eval_model.onnx")
    ckpt = tmp_path / "checkpoint"
    write_checkpoint(ckpt, decisive_mlp_weights(seed=5, d_hidden=HIDDEN))  # meets the target on any CPU
    from onnxport.core.io.readers import read_parameters

    result = export_model(eval_path, tmp_path / "model.onnx", ["logits", "probabilities"], read_parameters(ckpt))
    return eval_path, ckpt, result


def test_validate_quantize_bench_and_report(exported):
    eval_path, ckpt, result = exported
    seen = []
    out = post_export(result, eval_path, [ckpt], quantize="dynamic", validate=True,
                      progress=lambda f, m: seen.append(f))
    q_path = quantized_path(result.path, "dynamic")
    assert q_path.name == "model.int8.onnx" and q_path.is_file()
    assert precision_of(onnx.load(str(q_path))) == "quantized"
    assert out.passed is True
    v = out.validation
    assert v.reference_kind == "eval graph + parameters" and v.passed
    assert all(o.max_abs_diff < 1e-4 for o in v.outputs)
    assert out.quantize.validation.reference == str(result.path)  # the fp32 export is the reference
    assert len(out.bench.models) == 2 and out.bench.size_ratio > 0
    report = json.loads(report_path_for(result.path).read_text())
    assert report["export"]["path"] == str(result.path) and report["chart"]["latency_ms"]["after"] > 0
    assert out.report_path == report_path_for(result.path)
    assert out.report == report  # the front ends get the report as written, without reading it back
    assert any("report:" in line for line in out.summary_lines)
    as_json = json.loads(json.dumps(out.to_dict()))  # the CLI's --json
    assert as_json["passed"] is True and as_json["report_path"] == str(report_path_for(result.path))
    assert as_json["validation"] == report["validation"] and as_json["bench"] == report["bench"]
    assert seen[-1] == 1.0 and all(b >= a for a, b in zip(seen, seen[1:]) if a is not None and b is not None)


def test_validate_only_and_fp16(exported):
    eval_path, ckpt, result = exported
    out = post_export(result, eval_path, [ckpt], validate=True)
    assert out.passed is True and out.quantize is None and out.bench is None
    assert "quantize" not in out.to_dict() and "bench" not in out.to_dict()
    out16 = post_export(result, eval_path, [ckpt], quantize="fp16")
    assert quantized_path(result.path, "fp16").is_file() and out16.quantize.mode == "fp16"
    assert out16.validation is None and "validation" not in out16.to_dict() and out16.passed is True


def test_validation_with_the_wrong_checkpoint_fails(exported, tmp_path):
    eval_path, _, result = exported
    other = tmp_path / "other_checkpoint"
    write_checkpoint(other, mlp_weights(seed=9, d_hidden=HIDDEN))
    out = post_export(result, eval_path, [other], validate=True)
    assert out.passed is False and not out.validation.passed
    assert out.to_dict()["passed"] is False and out.report["passed"] is False


def test_cancel_during_quantize_leaves_the_export_alone(exported):
    eval_path, ckpt, result = exported
    before = result.path.read_bytes()
    token = CancelToken()

    def progress(fraction, message):
        if "quantiz" in message:
            token.cancel()

    with pytest.raises(Cancelled):
        post_export(result, eval_path, [ckpt], quantize="static", validate=True, progress=progress, cancel=token)
    assert result.path.read_bytes() == before
    names = sorted(p.name for p in result.path.parent.iterdir())
    assert names == ["checkpoint", "eval_model.onnx", "model.onnx"]
