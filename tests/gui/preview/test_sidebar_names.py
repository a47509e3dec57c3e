"""Netron's node sidebar wraps a long output name instead of cutting it (issue 15, cut 12): the
style our server adds to Netron's page reaches it, measured in the page."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ...core.model_builders import session_for
from .test_netron_preview import panel  # noqa: F401 - the fixture

pytestmark = pytest.mark.gui
LONG = "/encoder/layer.0/attention/self/a_rather_long_module_name/Softmax_output_0_and_then_some_more"

CLICK_RELU = """(function () {
  const node = Array.from(document.querySelectorAll('#canvas g.node')).find(n => n.textContent.trim().startsWith('Relu'));
  if (!node) { return false; }
  (node.querySelector('.node-item') || node).dispatchEvent(new MouseEvent('click', {bubbles: true}));
  return true;
})()"""
MEASURE = """JSON.stringify(Array.from(document.querySelectorAll('.sidebar-item-value-line-content'))
  .filter(e => e.textContent.includes('Softmax_output_0_and'))
  .map(e => [e.scrollWidth, e.clientWidth, e.getBoundingClientRect().height]))"""


def js(qtbot, view, code):
    with qtbot.waitCallback(timeout=300_000) as done:
        view.run(code, done)
    return done.args[0]


def test_a_long_output_name_wraps_in_the_node_sidebar(qtbot, panel, tmp_path):  # noqa: F811
    graph = helper.make_graph([helper.make_node("Relu", ["x"], [LONG], name="/encoder/Relu")], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info(LONG, T.FLOAT, [1, 4])])
    path = tmp_path / "long.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(path), [LONG])
    assert js(qtbot, panel.view, CLICK_RELU) is True
    found: list = []
    qtbot.waitUntil(lambda: bool(found.extend(json.loads(js(qtbot, panel.view, MEASURE))) or found), timeout=300_000)
    for scroll_width, client_width, height in found:
        assert scroll_width <= client_width + 1, "the name is cut (it scrolls sideways)"
        assert height >= 24  # on two lines or more (11 px text): wrapped, all of it shown
