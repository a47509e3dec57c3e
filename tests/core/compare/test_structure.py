"""Structure diff on graphs the tests build: matching by place and op when names differ, weights by
content (initializers and Constant nodes), inserted Q/DQ pairs, opsets, If bodies."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.compare.compare import compare

from ..model_builders import forward_mlp, make_model, mlp_weights


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def _renamed(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every node and intermediate tensor renamed, nodes listed in reverse topological-safe order kept."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    outs = {o.name for o in copy.graph.output}
    names = {}
    for i, node in enumerate(copy.graph.node):
        node.name = f"node_{i}"
        for k, o in enumerate(node.output):
            if o not in outs:
                names[o] = f"t{i}_{k}"
                node.output[k] = names[o]
    for node in copy.graph.node:
        for k, x in enumerate(node.input):
            node.input[k] = names.get(x, x)
    return copy


def test_a_model_against_itself_has_no_difference(tmp_path):
    path = _save(forward_mlp(), tmp_path / "m.onnx")
    report = compare(path, path, run=False)
    s = report.structure.to_dict()
    assert s["nodes"]["matched"] == s["nodes"]["a"] == s["nodes"]["b"] == 9
    assert not s["nodes_added"] and not s["nodes_removed"] and not s["nodes_changed"]
    assert not s["initializers_changed"] and s["initializers_same"] == 6
    assert not report.differs


def test_renamed_nodes_and_tensors_match_by_place(tmp_path):
    a = _save(forward_mlp(), tmp_path / "a.onnx")
    b = _save(_renamed(forward_mlp()), tmp_path / "b.onnx")
    s = compare(a, b, run=False).structure
    assert len(s.matching.nodes) == 9 and s.renamed == 9
    assert not s.nodes_added and not s.nodes_removed and not s.nodes_changed
    assert s.matching.tensors["hidden"] == "t3_0"


def test_a_changed_initializer_is_named_with_its_change(tmp_path):
    w = mlp_weights()
    a = _save(forward_mlp(w), tmp_path / "a.onnx")
    changed = dict(w, **{"fc2.weight": w["fc2.weight"] + np.float32(0.5) * (np.arange(64).reshape(4, 16) == 3)})
    b = _save(forward_mlp(changed), tmp_path / "b.onnx")
    s = compare(a, b, run=False).structure
    assert [c.name for c in s.weights_changed] == ["fc2.weight"]
    assert s.weights_changed[0].stats.max_abs == np.float32(0.5)
    assert not s.nodes_changed and s.weights_same == 5


def _constant_model(weight: np.ndarray) -> onnx.ModelProto:
    """Weights held in Constant nodes (as PP-OCR's are), two branches reading the same input."""
    nodes = [
        helper.make_node("Constant", [], ["w1"], value=numpy_helper.from_array(weight, "w1")),
        helper.make_node("Constant", [], ["w2"], value=numpy_helper.from_array(weight * 2, "w2")),
        helper.make_node("MatMul", ["x", "w1"], ["y1"], name="left"),
        helper.make_node("MatMul", ["x", "w2"], ["y2"], name="right"),
        helper.make_node("Add", ["y1", "y2"], ["y"], name="sum"),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])


def test_a_changed_constant_weight_is_a_weight_change_not_a_node_change(tmp_path):
    w = np.arange(9, dtype=np.float32).reshape(3, 3)
    a = _save(_constant_model(w), tmp_path / "a.onnx")
    b_model = _renamed(_constant_model(w))
    b_model.graph.node[1].attribute[0].t.CopyFrom(numpy_helper.from_array(w * 2 + 1, "w2"))
    b = _save(b_model, tmp_path / "b.onnx")
    report = compare(a, b)
    s = report.structure
    assert len(s.matching.nodes) == 5  # the changed Constant pairs up by the slot it fills
    assert [(c.name, c.kind) for c in s.weights_changed] == [("w2", "constant")]
    assert not s.nodes_changed and not s.nodes_added and not s.nodes_removed
    first = report.numeric.first_divergence
    assert first is not None and first.node == "right" and first.name == "y2"
    added = {n.node: n.added for n in report.numeric.nodes}  # what the app paints
    assert added["left"] == 0.0 and added["right"] > 0.01 and added["sum"] < added["right"]


def _qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with a QuantizeLinear/DequantizeLinear pair inserted before its first MatMul."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    g.initializer.extend([numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                          numpy_helper.from_array(np.array(0, np.int8), "z")])
    mm = next(n for n in g.node if n.op_type == "MatMul")
    q = helper.make_node("QuantizeLinear", [mm.input[0], "s", "z"], ["xq"], name="q")
    dq = helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xdq"], name="dq")
    mm.input[0] = "xdq"
    nodes = [q, dq] + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    return copy


def test_inserted_qdq_nodes_are_added_and_their_consumer_changed(tmp_path):
    a = _save(forward_mlp(), tmp_path / "a.onnx")
    b = _save(_renamed(_qdq(forward_mlp())), tmp_path / "b.onnx")
    report = compare(a, b)
    s = report.structure
    assert s.nodes_added == [{"name": "node_0", "op": "QuantizeLinear"}, {"name": "node_1", "op": "DequantizeLinear"}]
    assert not s.nodes_removed
    assert [c.name for c in s.nodes_changed] == ["/fc1/MatMul"]
    assert "input 0" in s.nodes_changed[0].changes[0]
    assert sorted(w["name"] for w in s.weights_added) == ["s", "z"]
    first = report.numeric.first_divergence
    assert first is not None and first.node == "/fc1/MatMul"


def test_opset_ir_metadata_and_io_changes_are_listed(tmp_path):
    a_model = forward_mlp()
    b_model = forward_mlp()
    b_model.opset_import[0].version = 18
    b_model.ir_version = 9
    helper.set_model_props(b_model, {"author": "someone"})
    b_model.graph.output.pop()  # probabilities no longer an output
    s = compare(_save(a_model, tmp_path / "a.onnx"), _save(b_model, tmp_path / "b.onnx"), run=False).structure
    d = s.to_dict()
    assert d["opsets"] == {"ai.onnx": {"a": 17, "b": 18}}
    assert d["ir_version"] == {"a": 8, "b": 9}
    assert d["metadata"]["added"] == ["author"]
    assert [o["name"] for o in d["outputs"]["removed"]] == ["probabilities"]


def test_if_bodies_are_compared_node_by_node(tmp_path):
    def model(op: str) -> onnx.ModelProto:
        then = helper.make_graph([helper.make_node(op, ["x"], ["t"], name="inner")], "then", [],
                                 [helper.make_tensor_value_info("t", T.FLOAT, [2])])
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [],
                                  [helper.make_tensor_value_info("e", T.FLOAT, [2])])
        nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]
        return make_model(nodes, [helper.make_tensor_value_info("c", T.BOOL, []),
                                  helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    s = compare(_save(model("Relu"), tmp_path / "a.onnx"), _save(model("Sigmoid"), tmp_path / "b.onnx"),
                run=False).structure
    assert s.nodes_added == [{"name": "branch/then_branch/inner", "op": "Sigmoid"}]
    assert s.nodes_removed == [{"name": "branch/then_branch/inner", "op": "Relu"}]
    assert not s.nodes_changed  # the else branch is the same; the If node itself is matched
