"""The in-app report: verdict, chart bars (size, latency, error per output), nodes to keep in float."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.report import build_report
from onnxport.core.export.export import export_model
from onnxport.core.quantize.quantize import quantize

from ...core.model_builders import forward_mlp, mlp_weights

pytestmark = pytest.mark.gui


def test_report_of_a_real_quantization(qtbot, tmp_path):
    from onnxport.gui.widgets.report_view import ReportView

    forward = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), forward)
    fp32 = tmp_path / "fp32.onnx"
    export_model(forward, fp32, ["logits"])
    result = quantize(fp32, tmp_path / "int8.onnx", "dynamic")
    bench = benchmark([fp32, result.path], seconds=0.2)
    report = build_report(export={"path": str(fp32)}, quantize=result, bench=bench)
    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    view.set_report(report)
    panels = view.chart.panels()
    assert len(panels) >= 2  # size and latency before/after at least
    assert all(r.height() >= 0 for rects in view.chart.bar_rects() for r in rects)
    assert view.grab().width() == 700
    assert view.verdict.text() and ("passed" in view.verdict.text().lower() or "fail" in view.verdict.text().lower())
    assert "logits" in view.details.text()
