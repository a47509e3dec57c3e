"""The report: built from real results, JSON round-trip, chart section, text summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.report import REPORT_KIND, build_report, summary_lines, write_report
from onnxport.core.evaluate.validate import validate
from onnxport.core.quantize.quantize import quantize

from ..quant_models import outlier_mlp, save


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    fp32 = Path(save(outlier_mlp(), d / "mlp.onnx"))
    q = quantize(fp32, d / "mlp.int8.onnx", "dynamic")
    b = benchmark([fp32, q.path], seconds=0.05, min_runs=3, warmup=0)
    return fp32, q, b


def test_report_round_trips_through_json(results, tmp_path):
    fp32, q, b = results
    report = build_report(export={"path": str(fp32)}, validation=validate(fp32, fp32), quantize=q, bench=b)
    path = write_report(tmp_path / "r.report.json", report)
    assert json.loads(path.read_text()) == report
    assert report["kind"] == REPORT_KIND and report["version"] == 1 and report["passed"] is True
    assert report["quantize"]["kept_float_nodes"] == ["fc2/MatMul"]
    assert report["quantize"]["size_ratio"] == pytest.approx(q.size_ratio, abs=1e-4)
    assert report["bench"]["latency_ratio"] == pytest.approx(b.latency_ratio, abs=1e-4)
    chart = report["chart"]
    assert chart["labels"]["after"] == "dynamic"
    assert chart["size_bytes"] == {"before": q.source_size_bytes, "after": q.size_bytes}
    assert chart["latency_ms"]["before"] == pytest.approx(b.models[0].p50_ms, abs=1e-4)
    assert [o["name"] for o in chart["outputs"]] == ["y"] and chart["min_cosine"] == 0.99
    text = "\n".join(summary_lines(report))
    assert "kept in float" in text and "fc2/MatMul" in text and "PASSED" in text
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_non_finite_numbers_become_null_and_failures_show(results, tmp_path):
    fp32, q, _ = results
    v = validate(fp32, fp32)
    v.outputs[0].max_abs_diff = math.inf
    v.outputs[0].passed = False
    report = build_report(validation=v)
    assert report["validation"]["outputs"][0]["max_abs_diff"] is None and report["passed"] is False
    json.loads(write_report(tmp_path / "r.json", report).read_text())
    assert "n/a" in "\n".join(summary_lines(report))
    only_bench = build_report(bench=results[2])
    assert only_bench["passed"] is None and only_bench["chart"]["labels"]["before"] == "mlp.onnx"


def test_argmax_agreement_is_said_only_of_a_classifier_output():
    """A sentence embedding's 'argmax 75.0%' reads as a problem and means nothing: not printed."""
    from onnxport.core.evaluate.report import summary_lines

    outputs = [{"name": "sentence_embedding", "kind": "values", "cosine": 0.991, "max_abs_diff": 0.1,
                "argmax_agreement": 0.75, "passed": True},
               {"name": "logits", "kind": "classes", "cosine": 0.999, "max_abs_diff": 0.01,
                "argmax_agreement": 1.0, "passed": True}]
    text = "\n".join(summary_lines({"validation": {"passed": True, "reference_kind": "model", "reference": "m.onnx",
                                                   "inputs": "2 batches", "outputs": outputs}}))
    assert "argmax 100.0%" in text and "75.0%" not in text


def test_a_quantization_measured_without_a_target_has_no_verdict(results):
    """`--no-target` (the app's "No target"): the figures, never FAILED/BAD nor a failed report; the
    export's own validation still decides (issue 35: the app showed "Validation FAILED" there)."""
    import dataclasses

    fp32, q, _ = results
    missed = [dataclasses.replace(o, passed=False, reason="cosine 0.9 < 0.99") for o in q.validation.outputs]
    measured = dataclasses.replace(q, target=None, validation=dataclasses.replace(q.validation, outputs=missed))
    report = build_report(export={"path": str(fp32)}, validation=validate(fp32, fp32), quantize=measured)
    assert report["passed"] is True  # the export passed; the quantized model was only measured
    text = "\n".join(summary_lines(report))
    assert "quantized measured (no accuracy target)" in text and "BAD" not in text and "FAILED" not in text
    judged = build_report(export={"path": str(fp32)}, quantize=dataclasses.replace(measured, target=0.99))
    assert judged["passed"] is False and "quantized validation FAILED" in "\n".join(summary_lines(judged))
