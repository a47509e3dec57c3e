"""Small models with control flow (If inside If, Loop, Scan) whose bodies capture outer tensors.

Each body reads, from the enclosing graph: a weight (an initializer), a tensor a foldable node
computes from weights only (a `Transpose`/`Neg` of a weight: folding turns it into an
initializer), and a `Constant` node's output; each body also has an intermediate tensor of its
own. The nested-If model has a top-level tensor (`h`) that only a body reads: it is not a free
output. `feeds_*` give the inputs that exercise every branch.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

OPSET = 17


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def _vi(name: str, elem: int = T.FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value, name))


def nested_if() -> onnx.ModelProto:
    """y = If(flag, then: If(flag2, (x @ W^T) + C, (x @ W^T) * 2 + B), else: relu(x) - B); z = y + x."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "B")
    inner_then = helper.make_graph([helper.make_node("Add", ["t1", "C"], ["t3"], name="inner_add")],
                                   "inner_then", [], [_vi("t3")])
    inner_else = helper.make_graph([_const("k", np.array(2.0, np.float32)),
                                    helper.make_node("Mul", ["t1", "k"], ["t4"], name="inner_mul"),
                                    helper.make_node("Add", ["t4", "B"], ["t5"], name="inner_add_b")],
                                   "inner_else", [], [_vi("t5")])
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "WT"], ["t1"], name="then_matmul"),
                                helper.make_node("If", ["flag2"], ["t2"], name="inner_if",
                                                 then_branch=inner_then, else_branch=inner_else)],
                               "then", [], [_vi("t2")])
    else_g = helper.make_graph([helper.make_node("Sub", ["h", "B"], ["e1"], name="else_sub")], "else", [], [_vi("e1")])
    nodes = [_const("C", np.array([0.5, -1.0, 2.0], np.float32)),
             helper.make_node("Transpose", ["W"], ["WT"], name="transpose_w"),
             helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("If", ["flag"], ["y"], name="outer_if", then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["y", "x"], ["z"], name="add_z")]
    inputs = [_vi("x", T.FLOAT, [2, 3]), _vi("flag", T.BOOL, []), _vi("flag2", T.BOOL, [])]
    return _model(nodes, inputs, [_vi("y", T.FLOAT, [2, 3]), _vi("z", T.FLOAT, [2, 3])], [w, b])


def feeds_nested_if() -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    return [{"x": x, "flag": np.array(a), "flag2": np.array(b)} for a, b in itertools.product([True, False], repeat=2)]


def loop() -> onnx.ModelProto:
    """acc <- tanh(acc @ W^T + C), n times from x; outputs the final acc and every step's acc."""
    w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32) / 2, "W")
    body = helper.make_graph(
        [helper.make_node("MatMul", ["acc", "WT"], ["m"], name="body_matmul"),
         helper.make_node("Add", ["m", "C"], ["a"], name="body_add"),
         helper.make_node("Tanh", ["a"], ["acc_out"], name="body_tanh"),
         helper.make_node("Identity", ["cond"], ["cond_out"], name="body_cond"),
         helper.make_node("Identity", ["acc_out"], ["step"], name="body_step")],
        "body", [_vi("i", T.INT64, []), _vi("cond", T.BOOL, []), _vi("acc", T.FLOAT, [3])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [3]), _vi("step", T.FLOAT, [3])])
    nodes = [_const("C", np.full(3, 0.1, np.float32)),
             helper.make_node("Transpose", ["W"], ["WT"], name="transpose_w"),
             helper.make_node("Loop", ["n", "", "x"], ["final", "trace"], name="loop", body=body)]
    inputs = [_vi("x", T.FLOAT, [3]), _vi("n", T.INT64, [])]
    return _model(nodes, inputs, [_vi("final", T.FLOAT, [3]), _vi("trace", T.FLOAT, ["steps", 3])], [w])


def feeds_loop() -> list[dict[str, np.ndarray]]:
    x = np.array([0.3, -0.2, 0.9], np.float32)
    return [{"x": x, "n": np.array(n, np.int64)} for n in (0, 1, 4)]


def scan() -> onnx.ModelProto:
    """s <- s + x_t * (-W) + D over the rows of `seq`; outputs the final s and every step's s."""
    w = numpy_helper.from_array(np.array([1.5, -0.5, 0.25], np.float32), "W")
    sign = numpy_helper.from_array(np.array(-1.0, np.float32), "S")
    body = helper.make_graph(
        [helper.make_node("Mul", ["xt", "WN"], ["p"], name="body_mul"),
         helper.make_node("Add", ["s", "p"], ["q"], name="body_add"),
         helper.make_node("Add", ["q", "D"], ["s_out"], name="body_add_d"),
         helper.make_node("Identity", ["s_out"], ["step"], name="body_step")],
        "body", [_vi("s", T.FLOAT, [3]), _vi("xt", T.FLOAT, [3])], [_vi("s_out", T.FLOAT, [3]), _vi("step", T.FLOAT, [3])])
    nodes = [_const("D", np.array([0.0, 1.0, -1.0], np.float32)),
             helper.make_node("Mul", ["W", "S"], ["WN"], name="neg_w"),
             helper.make_node("Scan", ["init", "seq"], ["last", "steps"], name="scan", body=body, num_scan_inputs=1)]
    inputs = [_vi("init", T.FLOAT, [3]), _vi("seq", T.FLOAT, [4, 3])]
    return _model(nodes, inputs, [_vi("last", T.FLOAT, [3]), _vi("steps", T.FLOAT, [4, 3])], [w, sign])


def feeds_scan() -> list[dict[str, np.ndarray]]:
    seq = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    return [{"init": np.array([1.0, 2.0, 3.0], np.float32), "seq": seq}]


MODELS = {"nested_if": (nested_if, feeds_nested_if), "loop": (loop, feeds_loop), "scan": (scan, feeds_scan)}
