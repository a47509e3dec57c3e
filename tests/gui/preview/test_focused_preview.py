"""The focused preview in the panel, for real: a big graph drawn around the selection by Netron."""

from __future__ import annotations

import onnx
import pytest

from ...core.graph.test_focus import layered_model
from ...core.model_builders import eval_like_mlp, session_for

pytestmark = pytest.mark.gui
INSIDE = "/model/layers.6/Relu_output_0"  # a tensor of a layer the focused view collapses


@pytest.fixture
def panel(qtbot):
    from onnxport.gui.preview.preview_panel import PreviewPanel

    widget = PreviewPanel()
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    widget.show()
    yield widget
    widget.shutdown()


@pytest.fixture
def big(tmp_path):
    """62 nodes, drawn as a big graph: the tests set the panel's budget to 14 or 15."""
    path = tmp_path / "layered.onnx"
    model = layered_model(12)
    onnx.save(model, path)
    return session_for(path), {o: n.name for n in model.graph.node for o in n.output}.get


def test_a_big_graph_is_drawn_focused_and_show_more_grows_it(qtbot, panel, big):
    session, producer_of = big
    panel.whole_up_to = panel.initial_budget = 14  # 13 drawn: layers 1-10 collapsed, no room for one more
    panel.set_model(session, ["logits"], producer_of=producer_of)
    drawn = panel.wait_rendered(300)
    assert drawn == len(panel.focused.model.graph.node) == 13  # 12 source nodes + 1 placeholder
    assert "showing 12 of 62 nodes around logits" in panel.status.text()
    assert "layers.1 … layers.10" in panel.status.text()
    assert panel.more_button.isVisible()
    with qtbot.waitCallback(timeout=300_000) as found:
        panel.view.focus("/model/layers.1…10", found)  # the placeholder is drawn under its name
    assert found.args[0] is True
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as more:
        panel.show_more()
    assert panel.budget == 28
    assert more.args[0] == len(panel.focused.model.graph.node) == 28  # layers 8-10 drawn again
    assert "layers.1 … layers.7" in panel.status.text()
    for expected in (53, 62):  # budget 56: layers 3-10 drawn; 112: the whole graph
        with qtbot.waitSignal(panel.rendered, timeout=300_000) as whole:
            panel.show_more()
        assert whole.args[0] == expected
    assert panel.focused.complete and not panel.more_button.isVisible()


def test_selecting_a_tensor_it_does_not_draw_focuses_the_view_on_it(qtbot, panel, big):
    session, producer_of = big
    panel.whole_up_to = panel.initial_budget = 15
    panel.set_model(session, ["logits"], producer_of=producer_of)
    panel.wait_rendered(300)
    assert "/model/layers.6/Relu" not in panel.focused.shown_names
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as drawn:
        panel.focus_node(INSIDE)
    assert panel.focused.seeds == [INSIDE] and "/model/layers.6/Relu" in panel.focused.shown_names
    assert drawn.args[0] == len(panel.focused.model.graph.node)
    assert INSIDE in panel.status.text()
    # a tensor the view draws is only selected in the page: no new preview
    generation = panel._generation
    panel.focus_node("/model/layers.5/Add_1_output_0")
    assert not panel._debounce.isActive() and panel._generation == generation
    # new outputs bring the focus back to them
    panel.set_model(session, ["logits"], producer_of=producer_of)
    panel.wait_rendered(300)
    assert panel.focused.seeds == ["logits"]


def test_small_graphs_are_drawn_whole_without_show_more(qtbot, panel, tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(eval_like_mlp(), path)
    panel.set_model(session_for(path), ["logits"])
    assert panel.wait_rendered(300) == 7
    assert panel.focused is None and not panel.more_button.isVisible()
    assert "showing" not in panel.status.text()
