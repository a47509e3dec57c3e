"""Small crafted models with the input shapes real models have: scalars, batch-not-first RNN
states, unnamed image dims, a branch on a sample rate, sizes only some values fit, a crash."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from .model_builders import make_model

vi = helper.make_tensor_value_info


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def scaled() -> onnx.ModelProto:
    """y = x * scale: x float [batch, 4], scale a float scalar."""
    return make_model([helper.make_node("Mul", ["x", "scale"], ["y"])],
                      [vi("x", T.FLOAT, ["batch", 4]), vi("scale", T.FLOAT, [])], [vi("y", T.FLOAT, ["batch", 4])])


def rnn_step(width: int = 4) -> onnx.ModelProto:
    """stateN = state * sum(input): input [batch, 8], state [2, batch, width] (batch on axis 1, as
    in ONNX RNN/LSTM states); ORT refuses states whose batch differs from the input's."""
    nodes = [helper.make_node("ReduceSum", ["input", "axes"], ["total"], keepdims=1),
             helper.make_node("Mul", ["state", "total"], ["stateN"])]
    return make_model(nodes, [vi("input", T.FLOAT, [None, 8]), vi("state", T.FLOAT, [2, None, width])],
                      [vi("stateN", T.FLOAT, [2, None, width])], [_const("axes", np.array([1], np.int64))], opset=13)


def unnamed_image() -> onnx.ModelProto:
    """x [-1, 3, ?, ?] (a size of -1 and dim params '?', as PaddleOCR's exports declare them)."""
    x = vi("x", T.FLOAT, [-1, 3, "?", "?"])
    nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)]
    return make_model(nodes, [x], [vi("y", T.FLOAT, [-1, 3])], opset=13)


def sequence_model() -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, ["batch", "seq"])],
                      [vi("y", T.FLOAT, ["batch", "seq"])])


def rows_of_twelve() -> onnx.ModelProto:
    """y = Reshape(x, [-1, 12]): runs only when x has a multiple of 12 values (not the guessed ones)."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return make_model(nodes, [vi("x", T.FLOAT, ["batch", "n"])], [vi("y", T.FLOAT, [None, 12])],
                      [_const("shape", np.array([-1, 12], np.int64))])


def sample_rate_branch() -> onnx.ModelProto:
    """y = If(sr == 16000, input, Reshape(input, [3, -1, 7, 11]), which fails unless the input has a
    multiple of 231 values): like silero-vad, only the sample rate the model compares `sr` with
    runs on any input. sr is an int64 scalar."""
    then = helper.make_graph([helper.make_node("Identity", ["input"], ["a"])], "then", [], [vi("a", T.FLOAT, None)])
    shape = _const("s", np.array([3, -1, 7, 11], np.int64))
    bad = helper.make_graph([helper.make_node("Constant", [], ["odd"], value=shape),
                             helper.make_node("Reshape", ["input", "odd"], ["b"])], "else", [],
                            [vi("b", T.FLOAT, None)])
    nodes = [helper.make_node("Constant", [], ["rate"], value=_const("r", np.array(16000, np.int64))),
             helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["y"], then_branch=then, else_branch=bad)]
    return make_model(nodes, [vi("input", T.FLOAT, [None, None]), vi("sr", T.INT64, [])], [vi("y", T.FLOAT, None)])


def strided_cnn(strides=(2, 2)) -> onnx.ModelProto:
    """Two 3x3 convolutions with `strides` each: x [N, 3, H, W]."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((4, c, 3, 3)).astype(np.float32) for c in (3, 4))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], strides=list(strides), pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["h", "w2"], ["y"], strides=list(strides), pads=[1, 1, 1, 1])]
    return make_model(nodes, [vi("x", T.FLOAT, ["N", 3, "H", "W"])], [vi("y", T.FLOAT, None)],
                      [_const("w1", w1), _const("w2", w2)])


def sigfpe() -> onnx.ModelProto:
    """y = INT64_MIN / (x * 0 - 1): an int64 division overflow, which x86's idiv traps (SIGFPE)
    whatever x is; ORT checks division by zero, not this. Not foldable: it depends on the input."""
    nodes = [helper.make_node("Mul", ["x", "zero"], ["z"]), helper.make_node("Sub", ["z", "one"], ["minus_one"]),
             helper.make_node("Div", ["min", "minus_one"], ["q"]), helper.make_node("Cast", ["q"], ["y"], to=T.FLOAT)]
    return make_model(nodes, [vi("x", T.INT64, ["n"])], [vi("y", T.FLOAT, ["n"])],
                      [_const("zero", np.array(0, np.int64)), _const("one", np.array(1, np.int64)),
                       _const("min", np.array(np.iinfo(np.int64).min, np.int64))])
