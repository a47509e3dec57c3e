"""The preview opens on the outputs chosen, and its search box finds drawn nodes and tensors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ...core.model_builders import session_for

pytestmark = pytest.mark.gui
LAYERS = 30


def tall_chain(path) -> str:
    """x -> 30 x (Add, Relu) -> y: far taller than the view."""
    nodes, current = [], "x"
    for i in range(LAYERS):
        nodes.append(helper.make_node("Add", [current, f"b{i}"], [f"h{i}"], name=f"/layer{i}/Add"))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"a{i}"], name=f"/layer{i}/Relu"))
        current = f"a{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"], name="/out/Identity"))
    inits = [numpy_helper.from_array(np.full(4, i, np.float32), f"b{i}") for i in range(LAYERS)]
    graph = helper.make_graph(nodes, "tall", [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


@pytest.fixture
def panel(qtbot):
    from onnxport.gui.preview.preview_panel import PreviewPanel

    widget = PreviewPanel()
    qtbot.addWidget(widget)
    widget.resize(900, 500)
    widget.show()
    yield widget
    widget.shutdown()


def _js(qtbot, view, code):
    with qtbot.waitCallback(timeout=300_000) as got:
        view.run(code, got)
    return got.args[0]


OUTPUT_IN_VIEW_JS = """(function () {
  const item = document.querySelector('#canvas .graph-item-output');
  const target = document.getElementById('target').getBoundingClientRect();
  if (!item) { return false; }
  const r = item.getBoundingClientRect();
  return r.top >= target.top && r.bottom <= target.bottom;
})()"""


def test_a_tall_graph_opens_on_its_outputs(qtbot, panel, tmp_path):
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(tall_chain(tmp_path / "tall.onnx")), ["y"])
    qtbot.waitUntil(lambda: _js(qtbot, panel.view, OUTPUT_IN_VIEW_JS) is True, timeout=300_000)


def test_the_search_box_selects_drawn_nodes_and_tensors(qtbot, panel, tmp_path):
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(tall_chain(tmp_path / "tall.onnx")), ["y"])
    search = panel.search
    search.box.setText("layer7/RELU")  # case does not matter
    with qtbot.waitSignal(search.searched, timeout=300_000) as found:
        search.box.returnPressed.emit()
    assert found.args == [1] and search.found.text() == "1 found"
    selected = "document.getElementById('node-name-/layer7/Relu').classList.contains('select')"
    assert _js(qtbot, panel.view, selected) is True
    search.box.setText("h12")  # a tensor: Netron's edge
    with qtbot.waitSignal(search.searched, timeout=300_000) as found:
        search.box.returnPressed.emit()
    assert found.args[0] >= 1
    edges = _js(qtbot, panel.view, "JSON.stringify(Array.from(document.querySelectorAll('.select.edge-path'))"
                                   ".map((e) => e.id))")
    assert "edge-h12" in json.loads(edges)
    search.box.setText("no such thing")
    with qtbot.waitSignal(search.searched, timeout=300_000) as found:
        search.box.returnPressed.emit()
    assert found.args == [0] and search.found.text() == "not found"
