"""The compare view on the real Netron page: a changed weight's divergence painted on the error
overlay's scale and listed, a click that shows a node of the other graph, two checkpoints as a
sortable table, and a cancel."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from onnxport.gui.preview.compare_paint import ADDED, REMOVED
from onnxport.gui.preview.error_overlay import colour_for
from tests.support.checkpoint_writer import write_checkpoint

from ...core.model_builders import forward_mlp, mlp_weights
from .test_error_overlay import page_state, rgb

pytestmark = pytest.mark.gui


@pytest.fixture
def pair(tmp_path):
    w = mlp_weights()
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(forward_mlp(w), str(a))
    model = forward_mlp(dict(w, **{"fc2.weight": w["fc2.weight"] * np.float32(1.5)}))
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    model.graph.node.remove(softmax)  # B lacks A's Softmax: a removed node, painted on graph A
    del model.graph.output[1]
    onnx.save(model, str(b))
    return a, b


def opened(qtbot, *args):
    from onnxport.gui.preview.compare_window import CompareWindow

    win = CompareWindow(*args)
    qtbot.addWidget(win)
    win.show()
    return win


def test_divergence_is_painted_on_the_overlay_scale_and_listed(qtbot, pair):
    win = opened(qtbot, *pair)
    with qtbot.waitSignal(win.painted, timeout=300_000):
        win.start()
    report = win.report
    first = report["numeric"]["first_divergence"]
    assert first["node"] == "/fc2/Transpose"  # the changed weight passes through it first
    kinds = [win.table.item(r, 0).text() for r in range(win.table.rowCount())]
    assert "first divergence" in kinds and "weight changed" in kinds and "removed" in kinds
    assert win.side == "b" and win.last_painted > 0
    node = next(n for n in report["numeric"]["nodes"] if n["node"] == "/fc2/Transpose")
    state = page_state(qtbot, win.view, ["/fc2/Transpose", "/fc1/MatMul"])
    assert state["fills"]["/fc2/Transpose"] == rgb(colour_for(node["added"]))
    assert state["fills"]["/fc1/MatMul"] != rgb(colour_for(node["added"]))  # upstream: unchanged, unpainted
    assert "first divergence: /fc2/Transpose" in state["legend"]


def test_a_row_of_a_removed_node_shows_graph_a(qtbot, pair):
    win = opened(qtbot, *pair)
    with qtbot.waitSignal(win.painted, timeout=300_000):
        win.start()
    row = next(r for r in range(win.table.rowCount()) if win.table.item(r, 0).text() == "removed")
    with qtbot.waitSignal(win.painted, timeout=300_000):
        win.show_row(row)
    assert win.side == "a"
    state = page_state(qtbot, win.view, ["/softmax/Softmax"])
    assert state["fills"]["/softmax/Softmax"] == rgb(REMOVED)
    assert ADDED != REMOVED


def test_two_checkpoints_give_a_sortable_table_of_parameters(qtbot, tmp_path):
    w = mlp_weights()
    a = write_checkpoint(tmp_path / "a.ckpt", w)
    b = write_checkpoint(tmp_path / "b.ckpt", dict(w, **{"fc2.bias": w["fc2.bias"] + np.float32(1.0)}))
    win = opened(qtbot, a, b)
    with qtbot.waitSignal(win.shown, timeout=300_000):
        win.start()
    table = win.table
    assert table.rowCount() == 4 and win.view is None or not win.view.isVisible()
    rel = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())].index("rel L2")
    table.sortItems(rel, order=__import__("PySide6.QtCore").QtCore.Qt.SortOrder.DescendingOrder)
    assert table.item(0, 1).text() == "fc2.bias" and table.item(0, 0).text() == "changed"
    assert {table.item(r, 0).text() for r in range(1, 4)} == {"same"}


def test_cancel_stops_the_comparison(qtbot, pair):
    win = opened(qtbot, *pair)
    with qtbot.waitSignal(win.runner.ended, timeout=300_000) as ended:
        win.start()
        win.cancel()
    assert ended.args[1] == "cancelled" and win.report is None
    assert "cancelled" in win.status.text()
    json.dumps(win.graphs)  # nothing half-shown


def test_compare_with_from_the_main_window_uses_the_open_model(qtbot, window, pair):
    from onnxport.gui.preview.compare_window import CompareWindow

    a, b = pair
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths([a])
    assert window.compare_action in window.menuBar().actions()[0].menu().actions()
    win = window.compare_with([b])
    assert isinstance(win, CompareWindow) and (win.a, win.b) == (a, b)
    qtbot.addWidget(win)
    with qtbot.waitSignal(win.shown, timeout=300_000):
        pass
    assert win.report["structure"]["initializers_changed"][0]["name"] == "fc2.weight"
