"""The outputs tree model: rows are read from the groups only when Qt asks (no object per tensor
row), and they are exactly the rows the eager tree had - "Outputs" first, tensors under nested
module scopes in graph order, inputs and parameters last, counts in the group labels. A check set
before a group's rows were ever asked for shows when they are; checks made on a row deep in a
group reach `checked_outputs`."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from PySide6.QtCore import QModelIndex, Qt

from onnxport.core.graph.index import build_index
from onnxport.gui.widgets.outputs_tree import INPUTS_GROUP, OTHER_GROUP, OUTPUTS_GROUP, build_tree
from onnxport.gui.widgets.tree_model import OutputsTreeModel

pytestmark = pytest.mark.gui


def scoped_model() -> onnx.ModelProto:
    """Nested scopes (two layers, attention inside), an unscoped node, a weight, a label and a loss."""
    def node(op, ins, out, name, **kw):
        return helper.make_node(op, ins, [out], name=name, **kw)

    nodes = [
        node("MatMul", ["x", "w"], "/enc/layer.0/attn/MatMul_output_0", "/enc/layer.0/attn/MatMul"),
        node("Relu", ["/enc/layer.0/attn/MatMul_output_0"], "/enc/layer.0/Relu_output_0", "/enc/layer.0/Relu"),
        node("Relu", ["/enc/layer.0/Relu_output_0"], "/enc/layer.1/attn/Relu_output_0", "/enc/layer.1/attn/Relu"),
        node("Relu", ["/enc/layer.1/attn/Relu_output_0"], "top_relu", "TopRelu"),
        node("Relu", ["top_relu"], "/enc/layer.0/attn/late_output_0", "/enc/layer.0/attn/Late"),
        node("Relu", ["/enc/layer.0/attn/late_output_0"], "/head/logits_output_0", "/head/Gemm"),
        node("Sub", ["/head/logits_output_0", "labels"], "/loss/Sub_output_0", "/loss/Sub"),
        node("ReduceSum", ["/loss/Sub_output_0"], "loss", "/loss/ReduceSum", keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "scoped",
        [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("labels", T.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("loss", T.FLOAT, [])],
        initializer=[numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def reference_rows(index, needle: str = "") -> list:
    """What the eager tree showed, computed the plain way: [(label, children) or tensor name]."""
    top = set(index.graph_outputs) | set(index.suggested)
    root: dict = {}
    inputs = []
    for info in index.tensors.values():
        if needle not in info.name.lower():
            continue
        if info.kind.value in ("input", "parameter"):
            inputs.append(info.name)
            continue
        if info.name in top:
            continue
        node = root
        for part in info.scope.split("/") if info.scope else ():
            node = node.setdefault(("group", part), {})
        node[("tensor", info.name)] = None

    def rows(node: dict) -> list:  # a group's tensors, then its sub-groups
        return [key[1] for key in node if key[0] == "tensor"] + [
            (key[1], rows(value)) for key, value in node.items() if key[0] == "group"]

    outputs = [n for n in index.tensors if n in top and needle in n.lower()]
    loose = [key[1] for key in root if key[0] == "tensor"]  # no scope: their own group
    groups = [(key[1], rows(value)) for key, value in root.items() if key[0] == "group"]
    return ([(OUTPUTS_GROUP, outputs)] if outputs else []) + groups + ([(OTHER_GROUP, loose)] if loose else []) + (
        [(INPUTS_GROUP, inputs)] if inputs else [])


def model_rows(model: OutputsTreeModel, parent: QModelIndex = QModelIndex()) -> list:  # noqa: B008
    """The rows as Qt sees them, checking parent() and the group labels' counts on the way."""
    found = []
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        assert model.parent(index) == parent
        info = model.info(index)
        if info is not None:
            assert model.rowCount(index) == 0 and not model.hasChildren(index)
            assert model.data(index, Qt.UserRole) == info.name
            found.append(info.name)
            continue
        label, count = model.data(index).rsplit("  (", 1)
        children = model_rows(model, index)
        assert int(count.rstrip(")")) == count_tensors(children)
        found.append((label, children))
    return found


def count_tensors(rows: list) -> int:
    return sum(1 if isinstance(r, str) else count_tensors(r[1]) for r in rows)


@pytest.fixture
def index():
    return build_index(scoped_model())


def test_rows_are_the_eager_trees_rows(qtbot, qtmodeltester, index):
    model = OutputsTreeModel(index)
    expected = reference_rows(index)
    assert model_rows(model) == expected
    # scopes nest, graph order is kept, and a later tensor of an earlier scope joins its group
    assert expected[0] == (OUTPUTS_GROUP, ["loss", "/head/logits_output_0"])
    enc = dict(r for r in expected if isinstance(r, tuple))["enc"]
    assert enc[0] == ("layer.0", ["/enc/layer.0/Relu_output_0",  # a group's tensors before its sub-groups
                                  ("attn", ["/enc/layer.0/attn/MatMul_output_0", "/enc/layer.0/attn/late_output_0"])])
    assert expected[-2] == (OTHER_GROUP, ["top_relu"])  # no scope: never loose under a collapsed group
    assert expected[-1] == (INPUTS_GROUP, ["x", "labels", "w"])
    assert model.visible_tensor_count() == len(index)
    qtmodeltester.check(model, force_py=True)


def test_filtered_rows_and_index_of(qtbot, qtmodeltester, index):
    model = OutputsTreeModel(index)
    model.set_filter("layer.0", False, tree=build_tree(index, "layer.0"))
    assert model_rows(model) == reference_rows(index, "layer.0")
    assert model.visible_tensor_count() == 3
    assert model.index_of("/enc/layer.0/attn/late_output_0").isValid()
    assert not model.index_of("top_relu").isValid()  # filtered out
    model.set_filter("", True)  # graph outputs only: built here when not given
    assert model_rows(model) == [(OUTPUTS_GROUP, ["loss", "/head/logits_output_0"])]
    qtmodeltester.check(model, force_py=True)


def test_a_check_set_before_its_group_is_ever_asked_for_shows_and_toggles(qtbot, index):
    model = OutputsTreeModel(index)
    deep = "/enc/layer.0/attn/late_output_0"
    assert model.checked_outputs() == ["/head/logits_output_0"]  # the default (the loss is training-only)
    assert model.set_checked(deep, True)  # no row of "enc" was asked for yet
    row = model.index_of(deep)
    assert model.info(row).name == deep
    assert model.data(row, Qt.CheckStateRole) == Qt.Checked
    assert model.flags(row) & Qt.ItemIsUserCheckable
    sibling = model.index_of("/enc/layer.0/attn/MatMul_output_0")
    assert model.data(sibling, Qt.CheckStateRole) == Qt.Unchecked
    changed = []
    model.dataChanged.connect(lambda a, b, roles: changed.append(model.info(a).name))
    assert model.setData(row, Qt.Unchecked, Qt.CheckStateRole)
    assert changed == [deep] and model.checked_outputs() == ["/head/logits_output_0"]
    assert model.setData(sibling, Qt.Checked, Qt.CheckStateRole)
    assert model.checked_outputs() == ["/head/logits_output_0", "/enc/layer.0/attn/MatMul_output_0"]
    # the training-only loss, inputs and groups cannot be checked
    for name in ("loss", "x", "w"):
        assert not model.flags(model.index_of(name)) & Qt.ItemIsUserCheckable
        assert not model.setData(model.index_of(name), Qt.Checked, Qt.CheckStateRole)
    group = model.index(1, 0)
    assert model.info(group) is None and not model.setData(group, Qt.Checked, Qt.CheckStateRole)
    model.allow_training_only = True
    assert model.setData(model.index_of("loss"), Qt.Checked, Qt.CheckStateRole)
    assert model.checked_outputs()[-1] == "loss"


def test_group_indexes_and_rows_under_the_root(qtbot, index):
    model = OutputsTreeModel(index)
    top = [model.node(i).label for i in model.group_indexes(depth=1)]
    assert sorted(top) == sorted([OUTPUTS_GROUP, "enc", "loss", OTHER_GROUP, INPUTS_GROUP])  # head: only an output
    two = [model.node(i).label for i in model.group_indexes(depth=2)]
    assert "layer.0" in two and "attn" not in two
    loose = model.index_of("top_relu")  # no scope: in "Other tensors", not a row of the root
    assert loose.isValid() and model.node(model.parent(loose)).label == OTHER_GROUP
    # at every level, no tensor row follows a group row (it would look like the group's child)
    def check(parent):
        kinds = [model.info(model.index(r, 0, parent)) is None for r in range(model.rowCount(parent))]
        assert kinds == sorted(kinds), model.node(parent).label if parent.isValid() else "root"
        for r in range(model.rowCount(parent)):
            if kinds[r]:
                check(model.index(r, 0, parent))

    check(QModelIndex())
    assert model.index(99, 0) == QModelIndex() and model.rowCount(model.index(0, 1)) == 0


def test_every_role_the_tree_paints_with(qtbot, index):
    """The roles are compared as plain ints (tree_model's constants): each one still answers."""
    model = OutputsTreeModel(index)
    name = "/enc/layer.0/attn/MatMul_output_0"
    row = model.index_of(name)
    assert model.data(row, Qt.UserRole) == name
    assert model.data(row, Qt.DisplayRole) == "MatMul_output_0" == model.data(row)  # DisplayRole by default
    assert name in model.data(row, Qt.ToolTipRole)
    assert model.data(row, Qt.ForegroundRole) is None  # checkable: not grey
    assert model.data(model.index_of("loss"), Qt.ForegroundRole) is not None  # training-only: grey
    group = model.index(1, 0)
    assert model.data(group, Qt.FontRole).bold() and model.data(row, Qt.FontRole) is None
    assert model.data(group, Qt.CheckStateRole) is None and model.data(group, Qt.UserRole) is None
    for role in (Qt.DecorationRole, Qt.TextAlignmentRole, Qt.BackgroundRole, Qt.SizeHintRole):
        assert model.data(row, role) is None  # Qt's defaults
    assert model.headerData(0, Qt.Horizontal) == "Name" and model.headerData(0, Qt.Vertical) is None
    assert model.flags(QModelIndex()) == Qt.NoItemFlags


def test_rows_read_short_under_their_scope_with_readable_shapes(qtbot):
    """Under its scope a row shows what the scope does not say; "Outputs" and the inputs show whole
    names; the tooltip has the whole name as plain text; unnamed dims read `?`, named ones stay."""
    def relu(src, out, name):
        return helper.make_node("Relu", [src], [out], name=name)

    nodes = [relu("x", "/encoder/layer.3/output/LayerNorm/ReduceMean_output_0", "/encoder/layer.3/output/LayerNorm/RM"),
             relu("/encoder/layer.3/output/LayerNorm/ReduceMean_output_0", "onnx::Add_7", "/encoder/layer.3/Add"),
             relu("onnx::Add_7", "/encoder/<b>x</b>_output_0", "/encoder/Odd"),
             relu("/encoder/<b>x</b>_output_0", "/head/out", "/head/Relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "unk__2", None])],
                              [helper.make_tensor_value_info("/head/out", T.FLOAT, ["batch", "unk__2", None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    tree = OutputsTreeModel(build_index(model))
    deep = tree.index_of("/encoder/layer.3/output/LayerNorm/ReduceMean_output_0")
    assert tree.data(deep) == "ReduceMean_output_0"
    assert tree.data(tree.index_of("onnx::Add_7")) == "onnx::Add_7"  # not under its scope's prefix: whole
    odd = tree.index_of("/encoder/<b>x</b>_output_0")
    assert tree.data(odd) == "<b>x</b>_output_0"
    assert "&lt;b&gt;x&lt;/b&gt;" in tree.data(odd, Qt.ToolTipRole)  # escaped: shown as written
    assert "/encoder/layer.3/output/LayerNorm/ReduceMean_output_0" in tree.data(deep, Qt.ToolTipRole)
    assert tree.data(tree.index_of("/head/out")) == "/head/out"  # under "Outputs": the whole name
    assert tree.data(tree.index_of("x")) == "x"
    assert tree.data(tree.index_of("x").siblingAtColumn(1)) == "[batch, ?, ?]"
    assert tree.data(tree.index_of("/head/out").siblingAtColumn(1)) == "[batch, ?, ?]"
