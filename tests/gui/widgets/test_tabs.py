"""The Report tab scrolls as one page: a long report stays inside it and never grows the window."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from ..quantized_report import quantized_mlp_report

pytestmark = pytest.mark.gui


def test_a_long_report_scrolls_in_its_tab_and_the_window_keeps_its_size(qtbot, window, tmp_path):
    report = quantized_mlp_report(tmp_path, bench=True)[1]
    window.resize(1000, 600)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (1000, 600), timeout=300_000)
    window.tabs.setCurrentWidget(window.report_tab)
    QApplication.sendPostedEvents()  # the tab's layout requests
    size = window.size()
    window.report_view.set_report(report)
    tab = window.report_tab
    qtbot.waitUntil(lambda: tab.verticalScrollBar().maximum() > 0, timeout=300_000)  # taller than the tab: it scrolls
    QApplication.sendPostedEvents()  # the report's layout requests: a minimum that grew would resize now
    assert window.size() == size  # as a plain widget the report raised the window's minimum: 600 -> 700+ px
    assert window.minimumSizeHint().height() <= size.height()
    table, nodes = window.report_view.accuracy.diff, window.report_view.nodes
    assert table.isVisible() and table.rowCount() == len(report["diff"]["rows"])
    assert table.verticalScrollBar().maximum() == 0  # every row shown: no scroll bar nests in the tab's
    if nodes.isVisible():
        assert nodes.verticalScrollBar().maximum() == 0
