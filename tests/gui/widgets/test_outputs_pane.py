"""The outputs pane: group labels span the row (never cut by the Shape column) at every depth a
user opens, tensor rows keep their columns; the pane stays narrow whatever is checked."""

from __future__ import annotations

import pytest

from onnxport.core.graph.index import build_index
from onnxport.gui.widgets.outputs_pane import OutputsPane
from onnxport.gui.widgets.tree_model import OutputsTreeModel

from .test_tree_model import scoped_model

pytestmark = pytest.mark.gui


def test_group_labels_span_their_row_when_opened(qtbot):
    pane = OutputsPane()
    qtbot.addWidget(pane)
    model = OutputsTreeModel(build_index(scoped_model()))
    pane.show_model(model)
    tree = pane.tree
    top = {model.node(i).label: i for i in model.group_indexes(depth=1)}
    assert all(tree.isFirstColumnSpanned(i.row(), i.parent()) for i in top.values())
    enc = top["enc"]
    layer0 = model.index(0, 0, enc)
    assert model.node(layer0).label == "layer.0" and not tree.isFirstColumnSpanned(0, enc)  # not yet opened
    tree.expand(enc)
    assert tree.isFirstColumnSpanned(0, enc)
    tree.expand(layer0)
    tensor_row = model.index_of("/enc/layer.0/Relu_output_0")
    attn_row = model.rowCount(layer0) - 1
    assert tree.isFirstColumnSpanned(attn_row, layer0) and not tree.isFirstColumnSpanned(tensor_row.row(), layer0)


def test_many_checked_outputs_never_widen_the_pane(qtbot):
    pane = OutputsPane()
    qtbot.addWidget(pane)
    before = pane.minimumSizeHint().width()
    pane.show_checked([f"/encoder/layer.{i}/output/LayerNorm/Add_1_output_0" for i in range(12)])
    assert pane.minimumSizeHint().width() == before
    assert "layer.11" in pane.checked_label.toolTip()  # all of them on hover
