"""The graph gets the room: at 1400x860 the Preview's graph view covers at least half the window,
the outputs tree docks on the left, details and report on the right; the docks' sizes come back
in the next window (settings in a file of the test's own); the preview's status stays one line."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from onnxport.gui.widgets.elided_label import ElidedLabel

pytestmark = pytest.mark.gui


def test_the_graph_view_covers_half_the_window(qtbot, window, example):
    window.resize(1400, 860)
    assert window.preview.hint.isVisible() and not window.preview.view.isVisible()  # how to start, centred
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(example)
    view = window.preview.view
    qtbot.waitUntil(view.isVisible, timeout=300_000)  # the first preview: seen without picking a tab
    assert not window.preview.hint.isVisible()
    qtbot.waitUntil(lambda: window.size().width() == 1400 and window.size().height() == 860, timeout=300_000)
    # the layout gives the view its room in a pass after the resize: wait for it (or time out)
    qtbot.waitUntil(lambda: view.width() * view.height() >= 0.5 * 1400 * 860, timeout=300_000)
    left, right = window.outputs_dock.geometry(), window.details_dock.geometry()
    centre = window.preview.geometry()
    assert left.right() < centre.left() and centre.right() < right.left()
    assert window.left.isVisibleTo(window) and window.report_tab.isVisibleTo(window) is False  # Overview first


def test_the_docks_sizes_come_back(qtbot, window, settings):
    from onnxport.gui.main_window import MainWindow

    window.resize(780, 560)  # inside the offscreen screen (800x800): its geometry comes back as it was
    qtbot.waitUntil(lambda: window.size().width() == 780, timeout=300_000)
    window.details_dock.close()  # put away by the user
    QApplication.sendPostedEvents()  # its layout requests
    # a width the 780 px window always has room for beside the graph's minimum (340 was cut to 325 once)
    window.resizeDocks([window.outputs_dock, window.log_dock], [310, 120], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: abs(window.outputs_dock.width() - 310) <= 8, timeout=300_000)
    assert abs(window.outputs_dock.width() - 310) <= 8, (window.outputs_dock.width(), window.log_dock.width(), window.preview.width())
    window.close()
    again = MainWindow(settings=settings)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitUntil(lambda: again.isVisible(), timeout=300_000)
    qtbot.waitUntil(lambda: abs(again.outputs_dock.width() - 310) <= 8, timeout=300_000)
    assert again.size() == window.size() and abs(again.outputs_dock.width() - 310) <= 8  # not the 283 it starts with
    assert not again.details_dock.isVisible()
    again.close()


def test_the_preview_status_is_one_line_with_all_of_it_on_hover(qtbot, window):
    status = window.preview.status
    assert isinstance(status, ElidedLabel)
    one_line = status.sizeHint().height()
    long = "pruned graph, 55.0 KB without weights: showing 357 of 656 nodes around <b>embeddings</b>; " * 6
    status.setText(long + "\nsecond line")
    qtbot.waitUntil(lambda: super(ElidedLabel, status).text().endswith("…"), timeout=300_000)  # elided to its width
    assert status.text() == long + "\nsecond line"  # the whole text for whoever asks
    assert status.height() <= one_line + 2 and status.sizeHint().height() == one_line
    shown = super(ElidedLabel, status).text()
    assert shown.endswith("…") and "\n" not in shown and len(shown) < len(long)
    assert "&lt;b&gt;embeddings&lt;/b&gt;" in status.toolTip()  # as written, never markup
    assert status.textFormat() == Qt.TextFormat.PlainText


def test_a_report_gets_the_width_it_needs(qtbot, window, tmp_path):
    from ..quantized_report import quantized_mlp_report

    report = quantized_mlp_report(tmp_path)[1]
    window.resize(1400, 860)
    qtbot.waitUntil(lambda: window.size().width() == 1400, timeout=300_000)
    window.report_view.set_report(report)
    window._show_report_tab()
    tab = window.report_tab
    qtbot.waitUntil(lambda: tab.horizontalScrollBar().maximum() == 0, timeout=300_000)  # no side scroll
    assert window.details_dock.width() <= 0.45 * 1400 + 8  # the graph keeps the rest
