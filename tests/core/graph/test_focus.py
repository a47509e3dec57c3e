"""The focused preview of big graphs (core/graph/focus.py, focus_blocks.py, focus_units.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.drawing import draw_selection, draw_whole
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.graph.focus import FOCUS_DOMAIN, FocusGraph
from onnxport.core.graph.focus_blocks import find_runs, scope_indices, scope_table
from onnxport.core.util.errors import UnknownOutputError

HIDDEN = 4


def layered_model(layers: int = 12, heads: int = 0) -> onnx.ModelProto:
    """A decoder-like chain scoped as torch.onnx names it: per layer MatMul, Add, Relu, [heads x
    (Mul, Sigmoid)], MatMul, Add (residual), weights as initializers (no Constant nodes: Netron
    draws every node), then a head ending in `logits`."""
    nodes, inits = [], []

    def weight(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array(np.full(shape, 0.1, np.float32), name))
        return name

    def op(op_type: str, inputs: list[str], scope: str, suffix: str = "") -> str:
        name = f"{scope}/{op_type}{suffix}"
        nodes.append(helper.make_node(op_type, inputs, [f"{name}_output_0"], name=name))
        return f"{name}_output_0"

    x = op("Relu", ["x"], "/model/embed")
    for i in range(layers):
        s, w = f"/model/layers.{i}", f"model.layers.{i}"
        h = op("Relu", [op("Add", [op("MatMul", [x, weight(f"{w}.fc1", HIDDEN, HIDDEN)], s), weight(f"{w}.b1", HIDDEN)],
                            s)], s)
        for k in range(heads):
            hs = f"{s}/head.{k}"
            h = op("Mul", [h, op("Sigmoid", [h], hs)], hs)
        x = op("Add", [op("MatMul", [h, weight(f"{w}.fc2", HIDDEN, HIDDEN)], s, "_1"), x], s, "_1")
    nodes.append(helper.make_node("MatMul", [x, weight("lm_head", HIDDEN, 2)], ["logits"], name="/lm_head/MatMul"))
    graph = helper.make_graph(nodes, "layered", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", HIDDEN])],
                              [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain_model(length: int = 100) -> onnx.ModelProto:
    """Unscoped: `length` Relus in a row (nothing repeats by name), output `y`."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}" if i + 1 < length else "y"], name=f"relu{i}")
             for i in range(length)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", T.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def checked(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx.checker on the preview once its weight-free initializers hold zeros (a preview keeps
    no weight bytes by design; everything else must be valid ONNX as it is)."""
    full = onnx.ModelProto()
    full.CopyFrom(model)
    for t in full.graph.initializer:
        zeros = np.zeros([max(d, 0) for d in t.dims], onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
        t.CopyFrom(numpy_helper.from_array(zeros, t.name))
    onnx.checker.check_model(full)
    return model


def placeholders(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == FOCUS_DOMAIN]


def test_scopes_name_the_blocks():
    assert scope_indices("/model/layers.3/self_attn/head.5/Slice_2") == [
        ("/model/layers", 3), ("/model/layers.3/self_attn/head", 5)]
    assert scope_indices("/encoder/layer_0/MatMul_12") == [("/encoder/layer", 0)]
    assert scope_indices("Relu_7") == scope_indices("/model/Relu_7") == []


def test_a_big_graph_is_drawn_around_the_outputs_with_identical_layers_collapsed():
    model = layered_model(12)
    total = len(model.graph.node)  # 1 + 12 x 5 + 1
    focused = FocusGraph(model).focus(["logits"], budget=14)  # 13 drawn: no room for one more layer
    preview = checked(focused.model)
    (collapsed,) = placeholders(preview)
    assert collapsed.name == "/model/layers.1…10"
    assert collapsed.op_type == "layers 1-10 collapsed"
    assert "layers.1 … layers.10: 10 identical blocks, 50 nodes" in collapsed.doc_string
    assert focused.shown_nodes == total - 50 == len(preview.graph.node) - 1
    assert focused.total_nodes == total and not focused.complete and focused.hops is None
    # the placeholder reads the first kept layer and feeds the last one: the graph stays connected
    assert list(collapsed.input) == ["/model/layers.0/Add_1_output_0"]
    assert list(collapsed.output) == ["/model/layers.10/Add_1_output_0"]
    assert "showing 12 of 62 nodes around logits; 10 repeated blocks collapsed (layers.1 … layers.10)" \
        in focused.summary()
    # no weight of a collapsed layer is drawn; kept ones are, weight-free
    weights = {t.name for t in preview.graph.initializer}
    assert "model.layers.0.fc1" in weights and "model.layers.5.fc1" not in weights
    assert all(not t.raw_data and not t.float_data for t in preview.graph.initializer)


def test_nested_blocks_are_collapsed_only_when_the_outer_collapse_does_not_fit():
    graph = FocusGraph(layered_model(6, heads=8))  # a layer: 5 + 16 nodes
    outer = graph.focus(["logits"], budget=60)
    assert [p.name for p in placeholders(outer.model)] == ["/model/layers.1…4"]
    nested = graph.focus(["logits"], budget=23)
    names = sorted(p.name for p in placeholders(nested.model))
    assert names == ["/model/layers.0/head.1…6", "/model/layers.1…4", "/model/layers.5/head.1…6"]
    checked(nested.model)
    assert len(nested.model.graph.node) == 23 and len(outer.model.graph.node) == 45
    # room for more: the heads nearest the outputs are drawn again (layer 5's all, then layer 0's last)
    between = graph.focus(["logits"], budget=36)
    assert sorted(p.name for p in placeholders(between.model)) == ["/model/layers.0/head.1…5", "/model/layers.1…4"]
    assert len(between.model.graph.node) == 36
    checked(between.model)


def test_show_more_draws_the_collapsed_layers_nearest_the_outputs_first():
    graph = FocusGraph(layered_model(12))
    assert [p.name for p in placeholders(graph.focus(["logits"], budget=14).model)] == ["/model/layers.1…10"]
    more = graph.focus(["logits"], budget=23)
    (collapsed,) = placeholders(checked(more.model))
    assert collapsed.name == "/model/layers.1…8" and "8 identical blocks, 40 nodes" in collapsed.doc_string
    assert "/model/layers.9/Relu" in more.shown_names and len(more.model.graph.node) == 23


def test_constants_cost_nothing_netron_draws_them_inside_their_reader():
    model = layered_model(12)
    for k in range(40):  # a Constant feeding the head: Netron draws it inside the MatMul's box
        model.graph.node.insert(0, helper.make_node("Constant", [], [f"c{k}"], name=f"/c{k}",
                                                    value=numpy_helper.from_array(np.ones(1, np.float32))))
    model.graph.node.append(helper.make_node("Sum", ["logits"] + [f"c{k}" for k in range(40)], ["total"], name="/sum"))
    model.graph.output[0].name = "total"
    focused = FocusGraph(model).focus(["total"], budget=64)  # 63 drawn nodes (103 with the Constants)
    assert focused.complete and not placeholders(focused.model)


def test_the_cone_is_the_producer_chain_cut_at_the_budget():
    focused = FocusGraph(chain_model(100)).focus(["y"], budget=25)
    preview = checked(focused.model)
    assert [n.name for n in preview.graph.node] == [f"relu{i}" for i in range(75, 100)]
    assert focused.hops == 25 and focused.shown_nodes == 25 and focused.total_nodes == 100
    assert [i.name for i in preview.graph.input] == ["t75"] == focused.cut_inputs  # cut where it was cut
    assert "cut 25 hops up (1 tensors enter from outside)" in focused.summary()


def test_show_more_grows_the_view_until_it_is_whole():
    graph = FocusGraph(chain_model(100))
    shown = [graph.focus(["y"], budget=b).shown_nodes for b in (25, 50, 100)]
    assert shown == [25, 50, 100]
    assert graph.focus(["y"], budget=100).complete
    layered = FocusGraph(layered_model(12, heads=4))
    sizes = [len(layered.focus(["logits"], budget=b).model.graph.node) for b in (20, 40, 80, 160)]
    assert sizes == sorted(sizes) and sizes[-1] == len(layered.model.graph.node)


def test_a_selected_tensor_inside_a_collapsed_layer_becomes_the_focus():
    graph = FocusGraph(layered_model(12))
    tensor = "/model/layers.6/Relu_output_0"
    focused = graph.focus(["logits"], seeds=[tensor], budget=15)  # upstream: 34 nodes, 15 collapsed
    checked(focused.model)
    assert focused.seeds == [tensor]
    assert [o.name for o in focused.model.graph.output] == [tensor]
    assert "/model/layers.6/Relu" in focused.shown_names
    assert [p.name for p in placeholders(focused.model)] == ["/model/layers.1…4"]  # layers 0-5 upstream, 6 protected
    # a tensor the export does not need is no focus: the outputs stay it
    off = graph.focus(["/model/layers.2/Add_1_output_0"], seeds=[tensor], budget=5)
    assert off.seeds == ["/model/layers.2/Add_1_output_0"]


def test_the_whole_graph_mode_and_bad_outputs():
    graph = FocusGraph(layered_model(12))
    whole = graph.focus(None, budget=40)
    assert whole.total_nodes == len(graph.model.graph.node) and whole.seeds == ["logits"]
    checked(whole.model)
    with pytest.raises(UnknownOutputError, match="logitz"):
        graph.focus(["logitz"])


def test_small_graphs_are_previewed_whole_exactly_as_before():
    graphs = SelectionGraphs(layered_model(3), None, None)
    answer = draw_selection(graphs, ["logits"])
    assert answer.focused is None and answer.graph is None
    assert answer.data == graphs.get(["logits"]).preview.SerializeToString()


def test_the_graph_read_is_kept_with_its_selection():
    graphs = SelectionGraphs(layered_model(12), None, None)
    first = draw_selection(graphs, ["logits"], budget=40, whole_up_to=40)
    assert first.focused is not None and first.graph is not None
    again = draw_selection(graphs, ["logits"], budget=80, whole_up_to=40)
    assert again.graph is first.graph and len(again.focused.model.graph.node) > len(first.focused.model.graph.node)
    other = draw_selection(SelectionGraphs(layered_model(13), None, None), ["logits"], budget=40, whole_up_to=40)
    assert other.graph is not first.graph and other.focused.total_nodes == 67


def test_runs_need_three_identical_consecutive_blocks():
    names = scope_table(f"/m/layers.{i}/{op}" for i in range(5) for op in ("A", "B"))
    ops = ["Relu", "Relu"] * 2 + ["Relu", "Neg"] + ["Relu", "Relu"] * 2
    assert find_runs(names, ops, range(10)) == []  # block 2 differs: two runs of two
    (run,) = find_runs(names, ["Relu"] * 10, range(10))
    assert (run.first, run.last, run.nodes) == (1, 3, (2, 3, 4, 5, 6, 7))
    assert find_runs(names, ["Relu"] * 10, range(10), protected={4}) == []  # the selection breaks the run


def test_a_model_the_caller_already_read_is_not_read_again():
    from onnxport.core.graph.graph_table import GraphTable

    model = layered_model(12)
    table = GraphTable.read(model.graph)
    first = draw_whole(model, table, budget=14, whole_up_to=40)
    assert first.graph.model is model and first.graph.table is table
    assert first.focused.shown_nodes == 12
    again = draw_whole(model, table, budget=80, graph=first.graph, whole_up_to=40)
    assert again.graph is first.graph and again.focused.complete
    before = model.SerializeToString()
    draw_whole(model, table, seeds=["/model/layers.6/Relu_output_0"], budget=20, graph=first.graph, whole_up_to=40)
    assert model.SerializeToString() == before  # the caller's model is only read


def test_a_graph_input_as_output_is_drawn_as_an_input():
    focused = FocusGraph(layered_model(12)).focus(["x", "logits"], budget=14)
    assert [i.name for i in focused.model.graph.input] == ["x"]
    assert [o.name for o in checked(focused.model).graph.output] == ["x", "logits"]
