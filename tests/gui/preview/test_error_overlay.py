"""The report's error map painted on the real Netron page, read back from the page itself.

A real quantization (int8 path pinned: 7-bit weights, the same on every CPU) gives the report; the
preview draws the float model; the node headers must carry the colours the overlay computed (read
with runJavaScript from the page's computed styles), the legend must be there, and the report's
list and the graph must pick each other's nodes.
"""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.evaluate.report import accuracy_map, build_report

from ...core.model_builders import session_for
from ..quantized_report import quantized_mlp_report

pytestmark = pytest.mark.gui

FILLS_JS = """(function (names) {
  const out = {};
  for (const name of names) {
    const g = document.getElementById('node-name-' + name);
    const path = g && (g.querySelector('.node-item-type path') || g.querySelector('.node-item path'));
    out[name] = path ? getComputedStyle(path).fill : null;
  }
  const legend = document.getElementById('onnxport-legend');
  return JSON.stringify({fills: out, legend: legend ? legend.textContent : null,
                         painted: document.querySelectorAll('g.graph-node.onnxport-painted').length});
})(%s)"""


def rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


def page_state(qtbot, view, names: list[str]) -> dict:
    with qtbot.waitCallback(timeout=300_000) as got:
        view.run(FILLS_JS % json.dumps(names), got)
    return json.loads(got.args[0])


def paint_and_read(qtbot, overlay, report) -> tuple[dict, dict]:
    """Show `report`, wait for the page to be painted, return (payload, page state)."""
    with qtbot.waitSignal(overlay.painted, timeout=300_000):
        overlay.report_view.set_report(report)
    names = list(overlay.payload["nodes"])
    return overlay.payload, page_state(qtbot, overlay.preview.view, names)


@pytest.fixture
def quantized(tmp_path):
    return quantized_mlp_report(tmp_path)


@pytest.fixture
def overlay(qtbot):
    from onnxport.gui.preview.error_overlay import ErrorOverlay
    from onnxport.gui.preview.preview_panel import PreviewPanel
    from onnxport.gui.widgets.report_view import ReportView

    panel, report_view = PreviewPanel(), ReportView()
    for w in (panel, report_view):
        qtbot.addWidget(w)
        w.resize(900, 700)
        w.show()
    yield ErrorOverlay(panel, report_view)
    panel.shutdown()


def test_nodes_are_painted_with_the_colours_of_the_error_they_add(qtbot, overlay, quantized):
    fp32, report = quantized
    panel = overlay.preview
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(fp32), ["logits"])
    error_map = accuracy_map(report)
    assert error_map["nodes"], "the quantization must add a measurable error somewhere"
    payload, state = paint_and_read(qtbot, overlay, report)
    drawn = {n.name for n in onnx.load(fp32).graph.node}
    expected = {name: spec for name, spec in payload["nodes"].items() if name in drawn}
    assert expected and overlay.last_painted == len(expected) == state["painted"]
    for name, spec in expected.items():
        assert state["fills"][name] == rgb(spec["fill"]), name
    assert state["legend"] and "Error each node adds" in state["legend"]
    assert f"{len(expected)} nodes coloured" in state["legend"]
    jump = error_map["first_jump"]["node"]  # int8 path pinned: fc2 adds ~0.03
    assert jump in expected
    js = f"getComputedStyle(document.getElementById({json.dumps('node-name-' + jump)})" \
         ".querySelector('path.node-border')).strokeWidth"
    assert _js(qtbot, panel.view, js) == "3px"  # the first jump gets a thick border of its colour
    # the hover title carries the figures
    name = next(iter(expected))
    with qtbot.waitCallback(timeout=300_000) as title:
        panel.view.run(f"document.getElementById({json.dumps('node-name-' + name)}).querySelector('title').textContent",
                       title)
    assert "relative error" in title.args[0] and name in title.args[0]
    # a report without a map clears the page
    with qtbot.waitSignal(overlay.painted, timeout=300_000) as cleared:
        overlay.report_view.set_report(build_report(export={"path": str(fp32)}))
    assert cleared.args == [0]
    state = page_state(qtbot, panel.view, list(expected))
    assert state["painted"] == 0 and state["legend"] is None
    assert all(fill != rgb(expected[n]["fill"]) for n, fill in state["fills"].items())


def test_the_map_is_built_after_the_report_s_turn_and_only_the_newest_report_answers(qtbot, overlay, quantized):
    """The map (payload, page script) is not built in the turn that shows the report (it froze
    the window with it), and of two reports in one turn only the newest is painted and reported."""
    fp32, report = quantized
    panel = overlay.preview
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(fp32), ["logits"])
    payload, state = paint_and_read(qtbot, overlay, report)
    assert state["painted"] > 0
    answers: list[int] = []
    overlay.painted.connect(answers.append)
    overlay.report_view.set_report(build_report(export={"path": str(fp32)}))  # no map: would clear
    assert overlay.payload is payload  # not built in the report's own turn
    with qtbot.waitSignal(overlay.painted, timeout=300_000):
        overlay.report_view.set_report(report)  # the newest, in the same turn
    # a stale answer (the clear's) needs a page call made before now: the page answers in order,
    # so once a call made now has answered, every earlier one has
    assert not overlay._build_timer.isActive() and not overlay._apply_timer.isActive()  # nothing left to send
    with qtbot.waitCallback(timeout=300_000) as flushed:
        panel.view.run("0", flushed)
    assert answers == [state["painted"]]
    assert page_state(qtbot, panel.view, list(payload["nodes"]))["painted"] == state["painted"]


def test_the_report_list_and_the_graph_pick_each_others_nodes(qtbot, overlay, quantized):
    from PySide6.QtCore import Qt

    fp32, report = quantized
    panel, nodes = overlay.preview, overlay.report_view.nodes
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(fp32), ["logits"])
    paint_and_read(qtbot, overlay, report)
    assert nodes.count() >= 1
    listed = [nodes.item(i).data(Qt.ItemDataRole.UserRole) for i in range(nodes.count())]
    assert nodes.item(0).data(Qt.ItemDataRole.DecorationRole) is not None  # its colour on the graph
    # report -> graph: picking a node in the list selects it in Netron
    nodes.setCurrentRow(0)
    selected_js = f"document.getElementById({json.dumps('node-name-' + listed[0])}).classList.contains('select')"
    qtbot.waitUntil(lambda: _js(qtbot, panel.view, selected_js) is True, timeout=300_000)
    # graph -> report: a click on a node in the page selects it in the list
    target = listed[-1]
    nodes.setCurrentRow(-1)
    with qtbot.waitSignal(overlay.nodeClicked, timeout=300_000) as clicked:
        panel.view.run(f"document.getElementById({json.dumps('node-name-' + target)})"
                       ".querySelector('.node-item-type').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    assert clicked.args == [target]
    assert nodes.currentItem() is not None and nodes.currentItem().data(Qt.ItemDataRole.UserRole) == target


def _js(qtbot, view, code):
    with qtbot.waitCallback(timeout=300_000) as got:
        view.run(code, got)
    return got.args[0]


def test_colour_scale_is_fixed_and_monotonic():
    from PySide6.QtGui import QColor

    from onnxport.gui.preview.error_overlay import NONFINITE, colour_for, payload

    assert colour_for(1e-6) == colour_for(1e-4) == "#2e9d4f" and colour_for(0.5) == colour_for(0.1) == "#c8423b"
    assert colour_for(None) == colour_for(float("inf")) == colour_for(0.1, nonfinite=True) == NONFINITE
    hues = [QColor(colour_for(10 ** (-4 + k / 4))).hueF() for k in range(13)]  # green (0.38) -> red (0.01)
    assert hues == sorted(hues, reverse=True) and hues[0] > 0.3 > 0.05 > hues[-1]
    assert payload(None) == {"nodes": {}, "legend": None}


GEOMETRY_JS = """(function () {
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const legend = document.getElementById('onnxport-legend');
  const nodes = {};
  for (const g of document.querySelectorAll('g.graph-node')) {
    const path = g.querySelector('[class*="node-item-type"] path');
    nodes[g.id.substring('node-name-'.length)] = {box: box(g), fill: path ? getComputedStyle(path).fill : null};
  }
  return JSON.stringify({legend: legend ? box(legend) : null, target: box(document.getElementById('target')),
                         nodes: nodes, overlay: document.body.classList.contains('onnxport-overlay')});
})()"""


def test_only_the_error_colours_nodes_and_the_legend_covers_none(qtbot, overlay, quantized):
    """While the map is on, Netron's own category colours are neutral, and the legend sits in a
    strip below the graph area: no drawn node, as seen, lies under it. Before any map (issue 35)
    and after it, Relu is never Netron's dark red, which read as "error" before anything was
    quantized."""
    from onnxport.gui.preview.overlay_script import CALM_CATEGORIES

    fp32, report = quantized
    panel = overlay.preview
    with qtbot.waitSignal(overlay.painted, timeout=300_000) as cleared:  # drawn, and no map to paint
        panel.set_model(session_for(fp32), ["logits"])
    assert cleared.args == [0]
    before = json.loads(_js(qtbot, panel.view, GEOMETRY_JS))
    relu = next(n for n in onnx.load(fp32).graph.node if n.op_type == "Relu").name
    calm = before["nodes"][relu]["fill"]
    assert calm == CALM_CATEGORIES["activation"] and calm != "rgb(112, 41, 33)"  # not Netron's dark red
    payload, _ = paint_and_read(qtbot, overlay, report)
    state = json.loads(_js(qtbot, panel.view, GEOMETRY_JS))
    assert state["overlay"] and state["legend"]
    unpainted = [n for n in state["nodes"] if n not in payload["nodes"]]
    assert unpainted and all(state["nodes"][n]["fill"] == "rgb(228, 228, 228)" for n in unpainted)
    for name in payload["nodes"]:
        if name in state["nodes"]:
            assert state["nodes"][name]["fill"] == rgb(payload["nodes"][name]["fill"])
    left, top, right, bottom = state["legend"]
    assert state["target"][3] <= top  # the graph area ends where the legend begins
    for name, node in state["nodes"].items():  # what is seen of a node: its box within the graph area
        seen = [max(node["box"][0], state["target"][0]), max(node["box"][1], state["target"][1]),
                min(node["box"][2], state["target"][2]), min(node["box"][3], state["target"][3])]
        if seen[0] < seen[2] and seen[1] < seen[3]:
            assert seen[3] <= top or seen[1] >= bottom or seen[2] <= left or seen[0] >= right, name
    overlay.focus(relu)  # Netron's selection is red: blue while the map is on
    relu_js = json.dumps("node-name-" + relu)
    qtbot.waitUntil(lambda: _js(qtbot, panel.view, f"document.getElementById({relu_js}).classList.contains('select')"),
                    timeout=300_000)
    border = f"getComputedStyle(document.getElementById({relu_js}).querySelector('.node-border')).stroke"
    assert _js(qtbot, panel.view, border) == "rgb(31, 111, 208)"
    with qtbot.waitSignal(overlay.painted, timeout=300_000):
        overlay.report_view.set_report(build_report(export={"path": str(fp32)}))
    after = json.loads(_js(qtbot, panel.view, GEOMETRY_JS))
    assert not after["overlay"] and after["legend"] is None
    assert after["nodes"][relu]["fill"] == calm  # the calm colours back with the map off, never red



def test_integer_shape_nodes_are_never_coloured():
    """Shape -> Gather -> Concat (integers the quantizer leaves alone) give a Reshape its shape
    after a MatMul the quantizer fused with it: the map colours that group, never the integers."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    from onnxport.core.evaluate.tensor_errors import tensor_errors
    from onnxport.gui.preview.error_overlay import payload

    rng = np.random.default_rng(0)

    def model(scale: float) -> onnx.ModelProto:
        nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
                 helper.make_node("Gather", ["shape", "zero"], ["rows"], name="gather", axis=0),
                 helper.make_node("Concat", ["rows", "minus_one"], ["target"], name="concat", axis=0),
                 helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Reshape", ["h", "target"], ["y"], name="reshape")]
        inits = [numpy_helper.from_array(weight * np.float32(scale), "w"),
                 numpy_helper.from_array(np.array([0], np.int64), "zero"),
                 numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [8, 64])],
                                  [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    weight = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    fused = model(1.05)
    fused.graph.node[3].output[0] = fused.graph.node[4].input[0] = "h_int8"  # h is gone: mm fused
    errors = tensor_errors(fused, model(1.0), {"x": rng.standard_normal((8, 64)).astype(np.float32)})
    painted = payload(errors.to_dict())["nodes"]
    assert {"reshape", "mm"} <= set(painted) and not {"shape", "gather", "concat"} & set(painted)
