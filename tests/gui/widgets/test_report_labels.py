"""The report's heading and chart labels (issue 15, cut 12): a plain heading, x labels that never
overlap (measured with the font's metrics, as drawn)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFont, QFontMetricsF

from onnxport.gui.widgets.report_view import BAD, GOOD, ReportView

pytestmark = pytest.mark.gui
NAMES = ["probabilities/Relu_output_0", "probabilities/Softmax_output_0", "/encoder/layer.11/attention/output",
         "logits"]


def report(passed: bool | None) -> dict:
    outputs = [{"name": n, "cosine": 0.999 - 0.001 * i, "passed": True} for i, n in enumerate(NAMES)]
    chart = {"labels": {"before": "float32 model (before)", "after": "dynamic int8 model (after)"},
             "size_bytes": {"before": 2_000_000, "after": 600_000}, "latency_ms": {"before": 1.2, "after": 0.7},
             "outputs": outputs, "min_cosine": 0.99}
    return {"passed": passed, "chart": chart}


@pytest.mark.parametrize("width", [300, 420, 700, 1200])  # 300: about the minimum (280)
def test_chart_x_labels_never_overlap(qtbot, width):
    view = ReportView()
    qtbot.addWidget(view)
    view.resize(width, 600)
    view.show()
    view.set_report(report(True))
    qtbot.waitExposed(view, timeout=300_000)
    panels = view.chart.label_rects()
    assert len(panels) == 3 and [len(p) for p in panels] == [2, 2, len(NAMES)]
    small = QFont(view.chart.font())
    small.setPointSizeF(max(small.pointSizeF() * 0.85, 6.0))
    metrics = QFontMetricsF(small)
    every = [rect for row in panels for _, rect in row]
    for text, rect in (pair for row in panels for pair in row):
        assert rect.width() == pytest.approx(metrics.horizontalAdvance(text))  # the rect is the text's ink
        assert 0 <= rect.left() and rect.right() <= view.chart.width()
    for i, a in enumerate(every):
        for b in every[i + 1:]:
            assert not a.intersects(b), "two x labels overlap"
    shown = [text for text, _ in panels[2]]
    if width >= 420:
        assert shown[-1] == "logits"  # a short name is shown whole (at 300 px even it is elided)
    if width <= 700:
        assert any("…" in text for text in shown)  # a long one elided, not overlapping


def test_heading_is_plain(qtbot):
    view = ReportView()
    qtbot.addWidget(view)
    view.set_report(report(True))
    assert view.verdict.text() == "Validation passed"
    assert view.verdict.palette().windowText().color() == GOOD
    view.set_report(report(False))
    assert view.verdict.text() == "Validation FAILED"
    assert view.verdict.palette().windowText().color() == BAD
    view.set_report(report(None))
    assert view.verdict.text() == "Measured (not validated)"
