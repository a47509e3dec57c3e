"""The Log reads as entries (issue 35): one time stamp per entry, its other lines indented under it
(a report printed one stamped row at a time), long lines wrapped at the dock's width (they were
cut at the right edge), and a report's before/after table left to the Report tab."""

from __future__ import annotations

import pytest

from onnxport.core.evaluate.report import summary_lines
from onnxport.gui.widgets.log_dock import TABLE_SHOWN, LogDock, without_table

from ..quantized_report import quantized_mlp_report

pytestmark = pytest.mark.gui


def test_an_entry_has_one_stamp_and_its_lines_under_it(qtbot):
    dock = LogDock()
    qtbot.addWidget(dock)
    dock.log_lines(["wrote /x/model.onnx (1 KB)", "  ok logits: cosine 1.000000", "report: /x/model.report.json"])
    dock.log_line("deploying model.onnx")
    lines = dock.view.toPlainText().splitlines()
    stamp = lines[0][:10]
    assert stamp.rstrip()[2] == ":" and lines[0] == stamp + "wrote /x/model.onnx (1 KB)"
    assert lines[1:3] == [" " * 10 + "  ok logits: cosine 1.000000", " " * 10 + "report: /x/model.report.json"]
    assert lines[3][:10].strip() and lines[3].endswith("deploying model.onnx")  # a new entry, stamped


def test_a_long_line_wraps_at_the_docks_width_instead_of_being_cut(qtbot):
    dock = LogDock()
    qtbot.addWidget(dock)
    dock.resize(260, 200)
    dock.show()
    qtbot.waitExposed(dock, timeout=300_000)
    path = "/tmp/onnxport-shots-3b5_qka3/" + "a_long_folder_name/" * 4 + "model_inference.report.json"
    dock.log_line(f"report: {path}")
    block = dock.view.document().firstBlock()
    qtbot.waitUntil(lambda: block.layout().lineCount() > 1, timeout=300_000)  # wrapped, all of it in sight
    assert dock.view.horizontalScrollBar().maximum() == 0


def test_a_reports_table_stays_in_the_report_tab(tmp_path):
    _fp32, report = quantized_mlp_report(tmp_path)
    full = summary_lines(report)
    assert "before/after:" in full  # the CLI's -v table
    logged = without_table(full)
    assert logged[-1] == TABLE_SHOWN and logged[:-1] == full[:full.index("before/after:")]
    assert without_table(["a", "b"]) == ["a", "b"]
