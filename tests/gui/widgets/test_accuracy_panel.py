"""The report's accuracy part: where the error jumps, a node picked on the graph, the before/after table."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.evaluate.report import build_report
from onnxport.gui.widgets.plain_text import plain_tip

from ..quantized_report import quantized_mlp_report

pytestmark = pytest.mark.gui


@pytest.fixture
def report(tmp_path):
    return quantized_mlp_report(tmp_path, bench=True)[1]


def test_the_report_view_shows_the_diff_table_and_the_jump(qtbot, report):
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 900)
    view.show()
    shown = []
    view.reportChanged.connect(shown.append)
    view.set_report(report)
    assert shown == [report]
    panel = view.accuracy
    rows = panel.diff.rows()
    assert len(rows) == len(report["diff"]["rows"]) and panel.diff.isVisible()
    by_name = {r[1]: r for r in rows}
    assert by_name["MatMulInteger"][2:4] == ["0", str(sum(n.op_type == "MatMulInteger" for n in
                                                        onnx.load(report["quantize"]["path"]).graph.node))]
    assert by_name["int8"][4] in ("new", "") or by_name["int8"][4].startswith("+")
    assert "p50 (ms)" in by_name and "logits (cosine)" in by_name
    assert "int8.onnx" in panel.diff_label.text()
    tensors = report["quantize"]["validation"]["tensors"]
    assert panel.jump.isVisible() and f"{tensors['tensors_compared']} tensors compared" in panel.jump.text()
    node = tensors["nodes"][0]
    panel.show_node(node["node"])
    assert node["node"] in panel.node_info.text() and "relative error" in panel.node_info.text()
    panel.show_node("/not/measured")
    assert "no measurable error" in panel.node_info.text()
    view.set_report(build_report(export={"path": report["export"]["path"]}))  # nothing to compare
    assert not panel.diff.isVisible() and not panel.jump.isVisible() and panel.diff.rowCount() == 0


def test_a_shown_diff_table_measures_its_columns_once_per_fill(qtbot):
    """A cell set in a table whose header sizes columns to their contents measured its whole
    column again: filling 40 rows of 5 columns on a shown table measured a column 56 times."""
    from onnxport.gui.widgets.accuracy_panel import DiffTable

    measured: list[int] = []

    class CountingTable(DiffTable):
        def sizeHintForColumn(self, column: int) -> int:  # noqa: N802 - Qt override
            measured.append(column)
            return super().sizeHintForColumn(column)

    table = CountingTable()
    qtbot.addWidget(table)
    table.resize(600, 400)
    table.show()
    qtbot.waitExposed(table, timeout=300_000)
    rows = [{"section": "ops", "name": f"MatMul_{i}_" + "x" * (i % 7), "before": i, "after": i + 1} for i in range(40)]
    diff = {"before": "a.onnx", "after": "b.onnx", "rows": rows}
    longest = max(range(40), key=lambda i: len(rows[i]["name"]))
    fits = table.fontMetrics().horizontalAdvance(rows[longest]["name"])
    for _ in range(2):  # the second fill: the same table, shown and full
        measured.clear()
        table.set_diff(diff)
        qtbot.waitUntil(lambda: {0, 2, 3, 4} <= set(measured), timeout=300_000)  # the header's resize pass
        assert len(measured) <= 3 * table.columnCount()
    assert table.columnWidth(1) >= fits  # the name column (stretched) shows the longest name
    assert table.rows()[0][1] == "MatMul_0_" and len(table.rows()) == 40


def test_a_narrow_table_keeps_the_figures_whole_and_elides_the_names(qtbot):
    """The name column takes the room the figures leave (the Report tab of a small window)."""
    from onnxport.gui.widgets.accuracy_panel import DiffTable

    table = DiffTable()
    qtbot.addWidget(table)
    table.resize(420, 200)
    table.show()
    qtbot.waitExposed(table, timeout=300_000)
    name = "/model/layers.1/self_attn/o_proj/MatMul_output_0 (cosine)"
    table.set_diff({"before": "a.onnx", "after": "b.onnx",
                    "rows": [{"section": "accuracy", "name": name, "before": 1.0, "after": 0.995688}]})
    metrics = table.fontMetrics()

    def figures_whole() -> bool:
        return all(table.columnWidth(c) >= metrics.horizontalAdvance(table.item(0, c).text()) for c in (2, 3, 4))

    qtbot.waitUntil(figures_whole, timeout=300_000)  # the header's resize pass
    assert table.columnWidth(1) < metrics.horizontalAdvance(name)  # elided ...
    assert table.item(0, 1).toolTip() == plain_tip(name)  # ... and whole in its tooltip, as plain text


def test_a_change_below_what_is_shown_is_not_coloured(qtbot):
    from PySide6.QtCore import Qt

    from onnxport.gui.widgets.accuracy_panel import DiffTable

    table = DiffTable()
    qtbot.addWidget(table)
    table.set_diff({"before": "a.onnx", "after": "b.onnx", "rows": [
        {"section": "accuracy", "name": "y (cosine)", "before": 1.0, "after": 0.99999996},
        {"section": "accuracy", "name": "z (cosine)", "before": 1.0, "after": 0.99},
        {"section": "accuracy", "name": "w (cosine)", "before": 1.0, "after": 0.999999},
    ]}, failed={"z (cosine)"})
    assert table.rows()[0][2:] == ["1.000000", "1.000000", ""]
    assert table.item(0, 4).foreground().style() == Qt.BrushStyle.NoBrush  # no red for "no change"
    assert table.item(1, 4).text() == "-0.010000" and table.item(1, 4).foreground().color().name() == "#c8423b"
    # issue 35: -0.000001 on an output that passed its check is no loss to flag
    assert table.item(2, 4).text() == "-0.000001" and table.item(2, 4).foreground().style() == Qt.BrushStyle.NoBrush


def test_the_report_at_the_default_window_shows_every_short_name_whole(qtbot, window, report):
    """Issue 35: at 1400x860 the table showed "f...2", "D...r", "M...r": the name column got what the
    figures left of a 270 px panel. Names up to NAME_CHARS now show whole; the panel widens to fit."""
    from onnxport.gui.widgets.accuracy_panel import NAME_CHARS

    window.resize(1400, 860)
    window.report_view.set_report(report)
    window._show_report_tab()
    table = window.report_view.accuracy.diff
    qtbot.waitUntil(lambda: table.isVisible() and table.rowCount() > 0, timeout=300_000)
    metrics = table.fontMetrics()
    names = [row[1] for row in table.rows()]
    assert "DynamicQuantizeLinear" in names and "float32" in names
    short = [n for n in names if len(n) <= NAME_CHARS]
    needed = max(metrics.horizontalAdvance(n) for n in short)
    side = window.report_tab.horizontalScrollBar()
    qtbot.waitUntil(lambda: table.columnWidth(1) >= needed and side.maximum() == 0, timeout=300_000)  # and no side scroll
