"""Small models whose weights sit inside `If` bodies (the shape of silero-vad's): a MatMul pair in
one branch, an LSTM in the other, both reading a tensor of the main graph they capture.

`if_model(top=..., constants=...)`: inputs `x` [batch, seq, 64] float and `flag` (bool scalar);
output `y` [batch, seq, 64]. With `top`, the main graph computes `h = x @ Wtop` (a weight op
outside the bodies) and the bodies read `h`; else they read `x`. With `constants`, the body
weights are Constant nodes inside the bodies (as an exporter writes them) instead of body
initializers (as ONNX Runtime's optimizer leaves them). Body nodes are named `then/mm1`,
`then/mm2`, `else/lstm`. `feeds()` exercise both branches.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

D, HIDDEN, OPSET = 64, 64, 17


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {"Wtop": w(D, D, scale=D ** -0.5), "W1": w(D, 2 * D, scale=D ** -0.5),
            "W2": w(2 * D, D, scale=(2 * D) ** -0.5), "lstm.W": w(1, 4 * HIDDEN, D, scale=D ** -0.5),
            "lstm.R": w(1, 4 * HIDDEN, HIDDEN, scale=HIDDEN ** -0.5), "lstm.B": w(1, 8 * HIDDEN, scale=0.1)}


def _held(names: list[str], weights: dict[str, np.ndarray], constants: bool):
    """(Constant nodes, initializers) holding the named weights."""
    tensors = [numpy_helper.from_array(weights[n], n) for n in names]
    if constants:
        return [helper.make_node("Constant", [], [t.name], name=f"const/{t.name}", value=t) for t in tensors], []
    return [], tensors


def if_model(top: bool = False, constants: bool = False, seed: int = 0) -> onnx.ModelProto:
    weights = _weights(seed)
    src = "h" if top else "x"
    consts, inits = _held(["W1", "W2"], weights, constants)
    then_branch = helper.make_graph(consts + [
        helper.make_node("MatMul", [src, "W1"], ["a"], name="then/mm1"),
        helper.make_node("Relu", ["a"], ["r"], name="then/relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y_then"], name="then/mm2"),
    ], "then", [], [helper.make_tensor_value_info("y_then", T.FLOAT, None)], initializer=inits)
    consts, inits = _held(["lstm.W", "lstm.R", "lstm.B"], weights, constants)
    else_branch = helper.make_graph(consts + [
        helper.make_node("Transpose", [src], ["t"], name="else/in", perm=[1, 0, 2]),
        helper.make_node("LSTM", ["t", "lstm.W", "lstm.R", "lstm.B"], ["seq"], name="else/lstm", hidden_size=HIDDEN),
        helper.make_node("Squeeze", ["seq", "axis1"], ["s"], name="else/squeeze"),
        helper.make_node("Transpose", ["s"], ["y_else"], name="else/out", perm=[1, 0, 2]),
    ], "else", [], [helper.make_tensor_value_info("y_else", T.FLOAT, None)],
        initializer=inits + [numpy_helper.from_array(np.array([1], np.int64), "axis1")])
    nodes = [helper.make_node("MatMul", ["x", "Wtop"], ["h"], name="top/mm")] if top else []
    nodes.append(helper.make_node("If", ["flag"], ["y"], name="branch", then_branch=then_branch,
                                  else_branch=else_branch))
    graph = helper.make_graph(
        nodes, "body_weights",
        [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D]),
         helper.make_tensor_value_info("flag", T.BOOL, [])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", D])],
        initializer=[numpy_helper.from_array(weights["Wtop"], "Wtop")] if top else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def feeds(batches: int = 2, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((2, 6, D)).astype(np.float32), "flag": np.array(flag)}
            for _ in range(batches) for flag in (True, False)]


def save(model: onnx.ModelProto, path) -> str:
    onnx.checker.check_model(model, full_check=True)
    onnx.save_model(model, str(path))
    return str(path)


def captured_weight_model(outer_reader: bool = False, seed: int = 2) -> onnx.ModelProto:
    """A weight held by a Constant node of the main graph and read only inside the bodies (silero-vad's
    LSTM weights sit so, one If deeper): then `x @ Wc`, else `-(x @ Wc)`; with `outer_reader`,
    a main-graph node reads it too (`z = ReduceSum(Wc)`, an op kept float32 here), output `z`."""
    wc = (np.random.default_rng(seed).standard_normal((D, D)) * D ** -0.5).astype(np.float32)
    then_branch = helper.make_graph([helper.make_node("MatMul", ["x", "Wc"], ["t_out"], name="then/mm")], "then", [],
                                    [helper.make_tensor_value_info("t_out", T.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("MatMul", ["x", "Wc"], ["e_mm"], name="else/mm"),
                                     helper.make_node("Neg", ["e_mm"], ["e_out"], name="else/neg")], "else", [],
                                    [helper.make_tensor_value_info("e_out", T.FLOAT, None)])
    nodes = [helper.make_node("Constant", [], ["Wc"], name="const/Wc", value=numpy_helper.from_array(wc, "Wc")),
             helper.make_node("If", ["flag"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch)]
    outputs = [helper.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", D])]
    if outer_reader:
        nodes.append(helper.make_node("ReduceSum", ["Wc"], ["z"], name="outer/sum", keepdims=0))
        outputs.append(helper.make_tensor_value_info("z", T.FLOAT, []))
    graph = helper.make_graph(nodes, "captured_weight", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D]),
                                                         helper.make_tensor_value_info("flag", T.BOOL, [])], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model
