"""The Log dock never wraps (issue 29): a logged before/after table keeps one row per line and a
narrow dock scrolls sideways instead, so the columns line up."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QPlainTextEdit

from onnxport.gui.widgets.log_dock import LogDock

pytestmark = pytest.mark.gui


def test_a_wide_table_in_a_narrow_log_stays_one_line_per_row(qtbot):
    dock = LogDock()
    qtbot.addWidget(dock)
    dock.resize(260, 200)
    dock.show()
    qtbot.waitExposed(dock)
    rows = [f"{name:<28}{before:>14}{after:>14}{ratio:>10}" for name, before, after, ratio in
            (("op", "before", "after", "ratio"), ("MatMul", "12", "0", "0.00"),
             ("MatMulInteger", "0", "12", "n/a"), ("parameters (bytes)", "2,000,000", "600,000", "0.30"))]
    dock.log_lines(rows)
    view = dock.view
    doc = view.document()
    assert doc.blockCount() == len(rows)
    for k in range(doc.blockCount()):
        assert doc.findBlockByNumber(k).layout().lineCount() == 1  # never broken over two lines
    assert view.lineWrapMode() == QPlainTextEdit.LineWrapMode.NoWrap
    bar = view.horizontalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)  # the rest of a row is a scroll away
