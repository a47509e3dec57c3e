""""Start here" in the app (issue 39): a tensor of the tree or a node of the graph becomes the
export's input; the preview draws the cut at once, the plan says it, Export writes it. A weight
selected in the tree shows its numbers (equal numpy's) and histogram, read in a side job."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from PySide6.QtCore import QPoint

from onnxport.core.io.model_io import load_graph
from onnxport.gui.dialogs.export_dialog import ExportChoices

from .test_main_window import open_example

pytestmark = pytest.mark.gui

NODE_CENTRE_JS = """(function (id) {
  const g = document.getElementById(id); if (!g) { return ''; }
  const r = g.getBoundingClientRect(); return JSON.stringify([r.x + r.width / 2, r.y + r.height / 2]);
})(%s)"""


def _menu_actions(qtbot, window):
    from PySide6.QtWidgets import QApplication, QMenu

    qtbot.waitUntil(lambda: any(isinstance(w, QMenu) and w.isVisible() for w in QApplication.topLevelWidgets()),
                    timeout=300_000)
    menu = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMenu) and w.isVisible())
    return menu, {a.text(): a for a in menu.actions()}


def test_start_here_from_the_graph_cuts_the_preview_the_plan_and_the_export(qtbot, window, example, tmp_path):
    window.tabs.setCurrentWidget(window.preview)  # Chromium lays out no page nobody sees
    open_example(qtbot, window, example)
    assert window.preview.wait_rendered(300) == 4  # Gemm, Relu, Gemm, Softmax
    relu = next(n.name for n in load_graph(example[0]).graph.node if n.op_type == "Relu")
    view = window.preview.view
    with qtbot.waitCallback(timeout=300_000) as found:
        view.run(NODE_CENTRE_JS % json.dumps(f"node-name-{relu}"), found)
    x, y = json.loads(found.args[0])
    view.node_menu_at(QPoint(int(x), int(y)), view.mapToGlobal(QPoint(int(x), int(y))))  # the right click
    menu, actions = _menu_actions(qtbot, window)
    (start,) = [a for text, a in actions.items() if text.startswith("Start here at ")]
    tensor = start.text().removeprefix("Start here at ")
    with qtbot.waitSignal(window.preview.rendered, timeout=300_000) as drawn:
        start.trigger()
        menu.close()
    assert window.cut.starts == (tensor,) and drawn.args[0] == 2  # the second Gemm and the Softmax
    qtbot.waitUntil(lambda: "starts at (new inputs)" in window.plan_panel.text(), timeout=300_000)
    out = tmp_path / "head.onnx"
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, validate=True))  # a cut is not validated: said in the log
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert [i.name for i in written.graph.input] == [tensor]
    assert "exported without validation" in window.log.toPlainText()


def test_start_here_from_the_tree_and_back(qtbot, window, example):
    open_example(qtbot, window, example)
    relu_out = next(n.output[0] for n in load_graph(example[0]).graph.node if n.op_type == "Relu")
    index = window.model.index_of(relu_out)
    window.tree.scrollTo(index)
    pos = window.tree.visualRect(index).center()
    window.cut.tree_menu(window.tree, pos)
    menu, actions = _menu_actions(qtbot, window)
    actions[f"Start here at {relu_out}"].trigger()
    menu.close()
    assert window.cut.starts == (relu_out,)
    qtbot.waitUntil(lambda: "starts at (new inputs)" in window.plan_panel.text(), timeout=300_000)
    window.cut.tree_menu(window.tree, pos)
    menu, actions = _menu_actions(qtbot, window)
    actions["Start from the model's inputs again"].trigger()
    menu.close()
    assert window.cut.starts == ()
    qtbot.waitUntil(lambda: "starts at" not in window.plan_panel.text() and "inputs:" in window.plan_panel.text(),
                    timeout=300_000)


def test_a_selected_weight_shows_its_numbers_and_histogram(qtbot, window, example):
    window.resize(1400, 860)  # a laptop's window: the Details dock narrow, the Log under it
    open_example(qtbot, window, example)
    weights = window.session.params["fc1.weight"].array()
    index = window.model.index_of("fc1.weight")
    window.tree.setCurrentIndex(index)
    panel = window.weight_panel
    qtbot.waitUntil(lambda: panel.stats is not None, timeout=300_000)
    stats, x = panel.stats, np.asarray(weights, np.float64)
    assert (stats.min, stats.max, stats.count) == (x.min(), x.max(), x.size)
    assert stats.mean == pytest.approx(x.mean()) and stats.std == pytest.approx(x.std())
    assert stats.histogram == np.histogram(x, bins=64, range=(x.min(), x.max()))[0].tolist()
    assert panel.isVisible() and panel.histogram.counts == stats.histogram
    assert "fc1.weight: float32 [768 x 256]" in panel.text.text() and "from the checkpoint" in panel.text.text()
    # the tab scrolls the numbers and the whole histogram into view, once laid out; nothing is cut
    # at the right (the lines wrap at the dock's width)
    qtbot.waitUntil(lambda: panel.histogram.visibleRegion().boundingRect() == panel.histogram.rect(), timeout=300_000)
    assert window.overview.scroll.horizontalScrollBar().maximum() == 0
    window.tree.setCurrentIndex(window.model.index_of("logits"))  # not a weight: the panel goes
    assert not panel.isVisible()


def test_a_weight_chosen_on_the_graph_shows_its_numbers(qtbot, window, example):
    """A node right-clicked in the graph lists its weights; one chosen shows its numbers and
    histogram, as selecting it in the tree does (the checkpoint's value: the trained one)."""
    window.tabs.setCurrentWidget(window.preview)
    open_example(qtbot, window, example)
    assert window.preview.wait_rendered(300) == 4
    gemm = next(n for n in load_graph(example[0]).graph.node if n.op_type == "Gemm")
    view = window.preview.view
    with qtbot.waitCallback(timeout=300_000) as found:
        view.run(NODE_CENTRE_JS % json.dumps(f"node-name-{gemm.name}"), found)
    x, y = json.loads(found.args[0])
    view.node_menu_at(QPoint(int(x), int(y)), view.mapToGlobal(QPoint(int(x), int(y))))
    menu, actions = _menu_actions(qtbot, window)
    weights = [text for text in actions if text.startswith("Weight ")]
    assert weights == ["Weight fc1.weight: numbers and histogram", "Weight fc1.bias: numbers and histogram"]
    assert f"Start here at {gemm.output[0]}" in actions
    actions[weights[0]].trigger()
    menu.close()
    panel = window.weight_panel
    qtbot.waitUntil(lambda: panel.stats is not None, timeout=300_000)
    x = np.asarray(window.session.params["fc1.weight"].array(), np.float64)
    assert (panel.stats.name, panel.stats.min, panel.stats.max) == ("fc1.weight", x.min(), x.max())
    assert panel.stats.histogram == np.histogram(x, bins=64, range=(x.min(), x.max()))[0].tolist()
    assert window.tabs.currentWidget() is window.overview and panel.isVisible()
    assert window.model.info(window.tree.currentIndex()).name == "fc1.weight"
