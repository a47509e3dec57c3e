"""Text from files is shown as text, never as markup (issue 27 item 1): a tensor named
`<img src="...">` made the "checked outputs" label (rich text by default) open and read that file.
A model whose tensor names are markup is opened in the real window; every widget that shows those
names shows them as written, in plain text (or escaped, where a panel formats with HTML)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGui
from PySide6.QtGui import QTextDocument

from onnxport.core.util.errors import OnnxportError

from ..test_main_window import open_example

pytestmark = pytest.mark.gui


def _shown(markup: str) -> str:
    """What a rich-text string shows, as text."""
    doc = QTextDocument()
    doc.setHtml(markup)
    return doc.toPlainText()


@pytest.fixture
def names(tmp_path) -> list[str]:
    probe = tmp_path / "probe.png"  # a harmless file: if Qt took a name as markup it would read it
    probe.write_bytes(b"")
    return [f'<img src="{probe}">', "<b>x</b>", "a & b < c"]


@pytest.fixture
def markup_model(tmp_path, names):
    nodes = [helper.make_node("Relu", ["x"], [names[0]], name="<i>relu</i>"),
             helper.make_node("Neg", [names[0]], [names[1]], name="neg"),
             helper.make_node("Abs", [names[1]], [names[2]], name="abs")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(n, T.FLOAT, [1, 4]) for n in names])
    path = tmp_path / "markup.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_names_with_markup_are_shown_as_written(qtbot, window, markup_model, names):
    from onnxport.gui.dialogs.error_dialog import show_error
    from onnxport.gui.dialogs.export_dialog import ExportDialog

    open_example(qtbot, window, [markup_model])
    window.model.set_checked_outputs(names)
    assert window.model.checked_outputs() == names

    label = window.left.checked_label  # the label issue 27 found reading files
    assert label.textFormat() == Qt.TextFormat.PlainText
    assert label.text() == "3 output(s) checked: " + ", ".join(names)

    tip = window.model.data(window.model.index_of(names[0]), Qt.ItemDataRole.ToolTipRole)
    assert _shown(tip).splitlines()[0] == names[0] and "<img" not in tip  # escaped, read back as text
    assert "from Relu (<i>relu</i>)" in _shown(tip)

    window.tree.setCurrentIndex(window.model.index_of(names[1]))  # the "Selected tensor" panel (HTML)
    details = window.details_panel.text()
    assert "<b>x</b>" not in details and names[1] in _shown(details)

    window.export_dialog()
    dialog = window.findChild(ExportDialog)
    outputs_label = next(w for w in dialog.findChildren(type(label)) if w.text().startswith("Outputs kept"))
    assert outputs_label.textFormat() == Qt.TextFormat.PlainText
    assert outputs_label.text() == "Outputs kept: " + ", ".join(names)
    assert dialog.written.textFormat() == Qt.TextFormat.PlainText
    dialog.reject()

    box = show_error(window, "Export failed", OnnxportError(f"unknown output {names[0]}"))
    assert box.textFormat() == Qt.TextFormat.PlainText and box.text() == f"unknown output {names[0]}"
    box.close()

    accuracy = window.report_view.accuracy
    accuracy.show_node(names[1])
    assert accuracy.node_info.textFormat() == Qt.TextFormat.PlainText
    assert accuracy.node_info.text() == f"Picked on the graph: {names[1]}: no measurable error of its own"

    window.job_status.show_progress(0.5, f"exporting {names[0]}")
    assert window.job_status.text.textFormat() == Qt.TextFormat.PlainText
    assert window.job_status.text.text() == f"exporting {names[0]}"


def test_plain_tip_and_questions_show_text_as_written(qtbot, names):
    from PySide6.QtWidgets import QMessageBox

    from onnxport.gui.widgets.plain_text import message_box, plain_tip

    text = "\n".join(names)
    assert QtGui.mightBeRichText(plain_tip(text)) and _shown(plain_tip(text)) == text
    assert plain_tip("") == ""
    box = message_box(QMessageBox.Icon.Question, "Replace?", f"{names[0]} exists", QMessageBox.StandardButton.Yes,
                      None)
    assert box.textFormat() == Qt.TextFormat.PlainText and box.text() == f"{names[0]} exists"


def test_replace_questions_name_the_file_as_written(qtbot, tmp_path, settings, monkeypatch):
    """The export and deploy dialogs ask before replacing a file; its name is shown as plain text."""
    from PySide6.QtWidgets import QMessageBox

    from onnxport.gui.dialogs.deploy_dialog import DeployDialog
    from onnxport.gui.dialogs.export_dialog import ExportDialog
    from onnxport.gui.widgets import plain_text
    from tests.core.deploy.deploy_models import conv_model, save

    asked: list[str] = []
    monkeypatch.setattr(plain_text, "ask", lambda parent, title, text, *a, **k: asked.append(text)
                        or QMessageBox.StandardButton.No)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)  # AutoText: not asked
    existing = tmp_path / "<b>x<b>.onnx"  # markup a file name can hold (no slash)
    existing.write_bytes(b"the user's file")
    export = ExportDialog(None, ["y"], existing.name, settings=settings)
    qtbot.addWidget(export)
    export.path_edit.setText(str(existing))
    export._accept()
    save(conv_model(opset=18, ir_version=8), tmp_path / "m.onnx")
    deploy = DeployDialog(None, tmp_path / "m.onnx", settings=settings)
    qtbot.addWidget(deploy)
    deploy.target.setCurrentIndex(deploy.target.findData("ort-1.14"))
    deploy.out_edit.setText(str(existing))
    deploy._accept()
    assert len(asked) == 2 and all(text.startswith("<b>x<b>.onnx exists. Replace it") for text in asked), asked
    assert existing.read_bytes() == b"the user's file"
