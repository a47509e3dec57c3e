"""The in-app report: verdict, chart bars (size, latency, error per output), nodes to keep in float."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.report import build_report
from onnxport.core.export.export import export_model
from onnxport.core.quantize.quantize import QuantizeOptions, quantize

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


def _chart_report(outputs: list[dict], size=(94_770_000, 24_000_000)) -> dict:
    return {"passed": True, "chart": {"labels": {"before": "float32", "after": "dynamic"},
                                      "size_bytes": {"before": size[0], "after": size[1]},
                                      "latency_ms": {"before": 1.2, "after": 0.7},
                                      "outputs": outputs, "min_cosine": 0.99}}


def test_the_chart_shows_only_what_compares(qtbot):
    """One output: no error chart (its error is a line of text); outputs without error: no panel
    of zero-height bars; nothing to compare at all: no chart."""
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    view.set_report(_chart_report([{"name": "embeddings", "cosine": 0.995, "passed": True}]))
    assert [title for title, _, _ in view.chart.panels()] == ["Size", "Latency p50"]
    exact = [{"name": n, "cosine": 1.0, "passed": True} for n in ("logits", "probabilities")]
    view.set_report(_chart_report(exact))
    assert [title for title, _, _ in view.chart.panels()] == ["Size", "Latency p50"]
    two = [{"name": "logits", "cosine": 0.998, "passed": True}, {"name": "probabilities", "cosine": 1.0, "passed": True}]
    view.set_report(_chart_report(two))
    assert [title for title, _, _ in view.chart.panels()][-1] == "Error (1 - cosine)"
    assert all(r.height() >= 2 for rects in view.chart.bar_rects() for r in rects)  # a zero still shows
    view.set_report({"passed": True, "chart": {"outputs": two[:1]}})
    assert not view.chart.panels() and view.chart.isHidden()


def test_chart_sizes_say_what_the_text_says_in_a_unit_that_fits(qtbot):
    from onnxport.core.util.text import human_size
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    for before, after in ((2_355, 1_400), (94_770_000, 24_000_000)):
        view.set_report({**_chart_report([], (before, after)),
                         "quantize": {"mode": "dynamic", "size_bytes": after, "size_ratio": after / before}})
        size = view.chart.panels()[0]
        shown = [view.chart.value_text(size[0], value) for _, value, _ in size[1]]
        assert shown == [human_size(before), human_size(after)]
        assert human_size(after) in view.details.text()
    assert shown[0] == "90.4 MB" and view.chart.value_text("Size", 2_355) == "2.3 KB"


@pytest.mark.parametrize("width", [500, 700, 1200])
def test_chart_titles_are_whole(qtbot, width):
    from PySide6.QtGui import QFontMetricsF

    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    view.resize(width, 600)
    view.show()
    outputs = [{"name": n, "cosine": 0.999 - 0.001 * i, "passed": True} for i, n in enumerate(("a", "b"))]
    view.set_report(_chart_report(outputs))
    metrics = QFontMetricsF(view.chart.font())
    for (title, _, _, panel_width, _, _, _), _, _ in view.chart._layout():
        assert metrics.horizontalAdvance(title) <= panel_width, title


def test_argmax_agreement_is_said_only_of_a_classifier_output(qtbot):
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    outputs = [{"name": "sentence_embedding", "kind": "values", "cosine": 0.991, "max_abs_diff": 0.1,
                "argmax_agreement": 0.75, "passed": True},
               {"name": "logits", "kind": "classes", "cosine": 0.999, "max_abs_diff": 0.01,
                "argmax_agreement": 1.0, "passed": True}]
    view.set_report({"passed": True, "validation": {"reference_kind": "model", "reference": "/m/fp32.onnx",
                                                    "outputs": outputs}})
    text = view.details.text()
    assert "argmax 100.0%" in text and "75.0%" not in text


def test_the_size_ratio_is_said_once_and_a_slowdown_is_called_one(qtbot):
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    quantize = {"mode": "dynamic", "size_bytes": 208_000, "size_ratio": 0.261}
    view.set_report({"quantize": quantize, "bench": {"speedup": 1.31, "latency_ratio": 0.762, "size_ratio": 0.261}})
    text = view.details.text()
    assert "0.26x the float32 size" in text and "x0.261" not in text and "1.31x</b> faster" in text
    view.set_report({"quantize": quantize, "bench": {"speedup": 0.88, "latency_ratio": 1.137, "size_ratio": 0.261}})
    assert "1.14x</b> slower" in view.details.text()


def test_speed_is_the_benchmarks_paired_verdict_never_a_ratio_of_noise(qtbot):
    """Issue 35 / bench interleaving: a ratio whose interval holds 1.0 is "no measurable difference",
    in the text and in the before/after table's colour (it said "11.33x slower" over a busy machine)."""
    from PySide6.QtCore import Qt

    from onnxport.core.evaluate.timing import RatioEstimate
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    noise = RatioEstimate(11.324, 0.775, 18.646, 22, 0.98)
    diff = {"before": "a.onnx", "after": "b.onnx",
            "rows": [{"section": "latency", "name": "p50 (ms)", "before": 0.048, "after": 0.49}]}
    bench = {"speedup": 1 / 11.324, "latency_ratio": 11.324, "size_ratio": 0.26, "verdict": noise.verdict(),
             "paired": noise.to_dict()}
    view.set_report({"quantize": {"mode": "dynamic", "size_bytes": 208_000, "size_ratio": 0.261}, "bench": bench,
                     "diff": diff})
    text = view.details.text()
    assert "speed: <b>no measurable difference</b> (latency x11.324, 98% interval x0.775-18.646" in text
    assert "slower" not in text
    assert view.accuracy.diff.item(0, 4).foreground().style() == Qt.BrushStyle.NoBrush  # neither red nor green
    slower = RatioEstimate(1.5, 1.3, 1.7, 22, 0.95)
    view.set_report({"bench": {**bench, "verdict": slower.verdict(), "paired": slower.to_dict()}, "diff": diff})
    assert "speed: <b>1.50x slower</b>" in view.details.text()
    assert view.accuracy.diff.item(0, 4).foreground().color().name() == "#c8423b"


def test_a_quantization_measured_without_a_target_is_not_called_failed(qtbot, tmp_path):
    """The dialog's "No target" (`--no-target`): the figures, no FAILED, no red bars, no target line."""
    import dataclasses

    from onnxport.core.evaluate.validate import validate
    from onnxport.gui.widgets.report_view import BAD, ReportView

    forward = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), forward)
    fp32 = tmp_path / "fp32.onnx"
    export_model(forward, fp32, ["logits", "probabilities"])
    result = quantize(fp32, tmp_path / "int8.onnx", "dynamic", QuantizeOptions(int8_path="avx2", accuracy_target=None))
    missed = [dataclasses.replace(o, passed=False, reason="argmax agreement 0.9 < 0.99") for o in result.validation.outputs]
    result = dataclasses.replace(result, validation=dataclasses.replace(result.validation, outputs=missed))
    report = build_report(export={"path": str(fp32)}, validation=validate(fp32, fp32), quantize=result)
    view = ReportView()
    qtbot.addWidget(view)
    view.set_report(report)
    assert view.verdict.text() == "Validation passed · quantized: measured, no target"
    assert "✘" not in view.details.text() and "(measured, no accuracy target)" in view.details.text()
    error = [p for p in view.chart.panels() if p[0].startswith("Error")]
    assert error and error[0][2] is None and all(colour != BAD for _, _, colour in error[0][1])
    table = view.accuracy.diff
    accuracy = [i for i, row in enumerate(table.rows()) if row[0] == "accuracy" or row[1].endswith("(cosine)")]
    assert accuracy and all(table.item(i, 4).foreground().color().name() != BAD.name() for i in accuracy)
