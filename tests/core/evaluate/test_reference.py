"""The reference a model is validated against puts training-mode BatchNormalization and Dropout in
their inference form inside If bodies too (at any depth), so ONNX Runtime computes the eval
semantics there: running statistics, no dropping."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.reference import FALSE_NAME, eval_semantics, reference_model
from onnxport.core.graph.uses import walk_bodies
from onnxport.core.util.errors import OnnxportError

C = 3
MEAN, VAR, EPS = 0.5, 4.0, 1e-5


def _vi(name, elem=T.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def training_if_model(stats_read_by_body: bool = False) -> onnx.ModelProto:
    """y = If(flag, then: Dropout(BN_train(x)), else: If(flag2, Dropout(x), Identity(x))); the BN
    weights, the dropout ratio and its `training_mode` True live in the main graph (captured)."""
    drop_inner = helper.make_graph([helper.make_node("Dropout", ["x", "ratio", "train"], ["d2"], name="inner/drop")],
                                   "inner_then", [], [_vi("d2")])
    ident = helper.make_graph([helper.make_node("Identity", ["x"], ["i2"], name="inner/id")], "inner_else", [],
                              [_vi("i2")])
    else_branch = helper.make_graph(
        [helper.make_node("If", ["flag2"], ["e"], name="inner", then_branch=drop_inner, else_branch=ident)],
        "else", [], [_vi("e")])
    then_nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn", "rm", "rv"],
                                   name="then/bn", training_mode=1, epsilon=EPS),
                  helper.make_node("Dropout", ["bn", "ratio", "train"], ["d"], name="then/drop")]
    then_outputs = [_vi("d")]
    if stats_read_by_body:  # a running statistic the branch itself returns: only exists in training mode
        then_nodes.append(helper.make_node("If", ["flag2"], ["stat"], name="then/stat", then_branch=helper.make_graph(
            [helper.make_node("Identity", ["rm"], ["s1"])], "st", [], [_vi("s1")]), else_branch=helper.make_graph(
            [helper.make_node("Identity", ["rv"], ["s2"])], "se", [], [_vi("s2")])))
        then_nodes.append(helper.make_node("ReduceSum", ["stat"], ["stat_sum"], keepdims=0))
        then_nodes.append(helper.make_node("Add", ["d", "stat_sum"], ["d_plus"]))
        then_outputs = [_vi("d_plus")]
    then_branch = helper.make_graph(then_nodes, "then", [], then_outputs)
    weights = [numpy_helper.from_array(np.full(C, v, np.float32), n)
               for n, v in (("scale", 2.0), ("bias", 0.25), ("mean", MEAN), ("var", VAR))]
    weights += [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
                numpy_helper.from_array(np.array(True), "train")]
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], name="outer", then_branch=then_branch, else_branch=else_branch)],
        "training_if", [_vi("x", T.FLOAT, [2, C, 4, 4]), _vi("flag", T.BOOL, []), _vi("flag2", T.BOOL, [])],
        [_vi("y", T.FLOAT, [2, C, 4, 4])], initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _feed(flag: bool, flag2: bool) -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((2, C, 4, 4)).astype(np.float32) * 3 + 1
    return {"x": x, "flag": np.array(flag), "flag2": np.array(flag2)}


def test_training_ops_inside_if_bodies_run_in_their_eval_semantics(tmp_path):
    path = tmp_path / "train.onnx"
    onnx.save_model(training_if_model(), str(path))
    model, feeds = reference_model(path, ["y"])
    assert feeds == {}
    onnx.checker.check_model(model, full_check=True)
    nodes = {n.name: n for _, _, _, body in walk_bodies(model.graph) for n in body.node}
    assert list(nodes["then/bn"].output) == ["bn"]
    assert nodes["then/drop"].input[2] == nodes["inner/drop"].input[2] == FALSE_NAME
    assert FALSE_NAME in {t.name for t in model.graph.initializer}  # once, in the main graph
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = _feed(True, False)
    want = (feed["x"] - MEAN) / np.sqrt(VAR + EPS) * 2.0 + 0.25  # running statistics, no dropping
    np.testing.assert_allclose(sess.run(["y"], feed)[0], want, rtol=1e-5, atol=1e-5)
    for flag2 in (True, False):  # the nested Dropout is the identity too
        feed = _feed(False, flag2)
        np.testing.assert_array_equal(sess.run(["y"], feed)[0], feed["x"])


def test_running_statistics_read_inside_a_body_are_refused():
    graph = training_if_model(stats_read_by_body=True).graph
    with pytest.raises(OnnxportError, match="BatchNormalization 'then/bn': its running statistics are used"):
        eval_semantics(graph)
