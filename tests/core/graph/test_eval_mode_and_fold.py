"""Inference form of training-mode ops, and freeze-time folding of parameter-only sub-graphs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.export import export_model
from onnxport.core.export.wire_format import padded_varint, varint
from onnxport.core.graph.eval_mode import to_inference_form

from ..model_builders import make_model, param_set


def test_batchnorm_training_mode_becomes_inference(tmp_path):
    rng = np.random.default_rng(0)
    c = 3
    stats = {"bn.weight": rng.random(c, dtype=np.float32) + 0.5, "bn.bias": rng.random(c, dtype=np.float32),
             "bn.running_mean": rng.random(c, dtype=np.float32), "bn.running_var": rng.random(c, dtype=np.float32) + 1}
    bn = helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                          ["y", "new_mean", "new_var"], name="/bn/BatchNormalization", training_mode=1, epsilon=1e-5)
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [2, c, 4, 4])]
    inputs += [helper.make_tensor_value_info(k, T.FLOAT, [c]) for k in stats]
    model = make_model([bn, helper.make_node("Relu", ["y"], ["out"], name="/relu/Relu")], inputs,
                       [helper.make_tensor_value_info("out", T.FLOAT, [2, c, 4, 4])])
    src = tmp_path / "bn.onnx"
    onnx.save(model, src)
    out = tmp_path / "bn_inf.onnx"
    result = export_model(src, out, ["out"], param_set(stats))
    assert result.eval_mode_changes == ["/bn/BatchNormalization"]
    node = onnx.load(out).graph.node[0]
    assert list(node.output) == ["y"]
    assert helper.get_attribute_value(node.attribute[0]) == 0 or all(
        a.i == 0 for a in node.attribute if a.name == "training_mode")
    x = rng.standard_normal((2, c, 4, 4)).astype(np.float32)
    (got,) = ort.InferenceSession(str(out)).run(None, {"x": x})
    s = {k: v.reshape(1, c, 1, 1) for k, v in stats.items()}
    ref = (x - s["bn.running_mean"]) / np.sqrt(s["bn.running_var"] + 1e-5) * s["bn.weight"] + s["bn.bias"]
    np.testing.assert_allclose(got, np.maximum(ref, 0), atol=1e-5)


def test_dropout_with_used_mask_is_pinned_to_inference():
    graph = helper.make_graph(
        [helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], name="d")], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2]), helper.make_tensor_value_info("mask", T.BOOL, [2])])
    result = to_inference_form(helper.make_model(graph))
    changed, graph = result.names("removed", "rewritten"), result.model.graph
    assert changed == ["d"]
    assert graph.node[-1].op_type == "Dropout" and graph.node[-1].input[2].endswith("training_mode_false")


def test_fold_chains_of_reshape_unsqueeze_cast_concat(tmp_path):
    w = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[2, 0, 1]),
        helper.make_node("Reshape", ["wt", "shape"], ["w2"]),
        helper.make_node("Unsqueeze", ["w2", "axes"], ["w3"]),
        helper.make_node("Cast", ["w3"], ["w4"], to=T.DOUBLE),
        helper.make_node("Cast", ["w4"], ["w5"], to=T.FLOAT),
        helper.make_node("Concat", ["w5", "w5"], ["w6"], axis=0),
        helper.make_node("Mul", ["x", "w6"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([4, 6], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.int64), "axes")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 4, 6]),
                               helper.make_tensor_value_info("w", T.FLOAT, [2, 3, 4])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2, 4, 6])], inits)
    src, out = tmp_path / "f.onnx", tmp_path / "g.onnx"
    onnx.save(model, src)
    result = export_model(src, out, ["y"], param_set({"w": w}))
    exported = onnx.load(out)
    assert [n.op_type for n in exported.graph.node] == ["Mul"] and result.folded == 6
    assert [t.name for t in exported.graph.initializer] == ["w6"]
    x = np.random.default_rng(1).standard_normal((2, 4, 6)).astype(np.float32)
    (got,) = ort.InferenceSession(str(out)).run(None, {"x": x})
    w6 = np.concatenate([np.transpose(w, (2, 0, 1)).reshape(1, 4, 6)] * 2)
    np.testing.assert_array_equal(got, x * w6)


def test_padded_varint_parses_like_a_plain_one():
    assert varint(300) == b"\xac\x02" and varint(0) == b"\x00"
    for value in (0, 1, 127, 128, 300, 2**31 - 1):
        msg = onnx.TensorProto()
        msg.ParseFromString(bytes([1 << 3]) + padded_varint(value))  # dims field (varint)
        assert list(msg.dims) == [value]
