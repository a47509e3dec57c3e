"""The report chart in a narrow Details dock (issue 29): its before/after labels take a short form
("dynamic" -> "int8") instead of being cut to "dy…ic", and a bar's tooltip gives the full name."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF

from onnxport.gui.widgets.chart_labels import short_label
from onnxport.gui.widgets.report_view import ReportChart

pytestmark = pytest.mark.gui


def chart_dict(outputs: int) -> dict:
    names = [f"/decoder/block.{i}/output" for i in range(outputs)]
    return {"labels": {"before": "float32", "after": "dynamic"},
            "size_bytes": {"before": 2_000_000, "after": 600_000}, "latency_ms": {"before": 1.2, "after": 0.7},
            "outputs": [{"name": n, "cosine": 0.99, "passed": True} for n in names], "min_cosine": 0.98}


def test_short_forms():
    assert [short_label(t) for t in ("float32", "dynamic", "static", "fp16", "model.int8.onnx", "logits")] == \
        ["fp32", "int8", "int8", "fp16", "model.int8", "logits"]


@pytest.mark.parametrize("width", [280, 320, 420])  # a narrow Details dock, 8 outputs beside
def test_narrow_chart_shows_short_labels_not_cut_ones(qtbot, width):
    chart = ReportChart()
    qtbot.addWidget(chart)
    chart.resize(width, 200)
    chart.set_chart(chart_dict(8))
    size, latency, errors = chart.label_rects()
    for title, row, after_value in (("Size", size, 600_000), ("Latency p50", latency, 0.7)):
        (before, _), (after, ink) = row
        assert before in ("float32", "fp32") and after in ("dynamic", "int8"), (before, after)  # never "dy…ic"
        assert chart.tooltip_at(ink.center()) == f"{title}, dynamic: {chart.value_text(title, after_value)}"
    assert len(errors) == 8
    assert chart.tooltip_at(QPointF(1, 1)) == ""  # the margin left of the first panel


def test_wide_chart_shows_the_full_names(qtbot):
    chart = ReportChart()
    qtbot.addWidget(chart)
    chart.resize(1400, 240)
    chart.set_chart(chart_dict(2))
    assert [text for text, _ in chart.label_rects()[0]] == ["float32", "dynamic"]
