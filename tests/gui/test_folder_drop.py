"""A dropped folder of thousands of unused files (issue 36, item 5): the Overview says how many
with a few names, one line, instead of a line per file (100,000 of them froze the window 12-17 s
while the panel laid them out); the listing runs in the open job, off the GUI thread."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from PySide6.QtGui import QTextDocument

from onnxport.gui.widgets.panels import MAX_LISTED

from .test_main_window import open_example

pytestmark = pytest.mark.gui
FILES = 2_000


def test_a_crowded_folder_shows_a_count_and_a_few_names(qtbot, window, tmp_path):
    folder = tmp_path / "crowded"
    folder.mkdir()
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "model.onnx")
    for i in range(FILES):
        (folder / f"note{i:05d}.txt").write_text("x")
    open_example(qtbot, window, [folder])
    assert len(window.session.others) == FILES  # every one counted...
    doc = QTextDocument()
    doc.setHtml(window.sources_panel.text())
    lines = [line for line in doc.toPlainText().splitlines() if "Not used here" in line]
    assert len(lines) == 1 and lines[0].startswith(f"Not used here: {FILES:,} files: note00000.txt (unknown), ")
    assert lines[0].count(".txt") == MAX_LISTED and lines[0].endswith(f"and {FILES - MAX_LISTED:,} more")
