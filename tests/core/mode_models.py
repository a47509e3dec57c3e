"""Small float32 models for the fp16 / int4 / calibration-source tests, built with onnx.helper.

- `constant_bn`: Conv -> x1000 -> BatchNormalization whose scale/bias/mean/variance are Constant
  nodes (as Paddle exports write them), variances 1e6..9.8e7 (as in PP-OCR's detector).
- `overflow_chain`: x * 3e4 -> Add -> x / 3e4: fine in float32, inf in float16 in the middle.
- `shared_weight`: one initializer read by an Add that must stay float32 and a Mul that need not.
- `transformer_mlp`: pre-LayerNorm FFN blocks with residuals (MatMul weights d x ff and ff x d) and a
  small projection to `features`: what int4 weight-only quantization is for.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from .model_builders import make_model


def _const(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=numpy_helper.from_array(np.asarray(array, np.float32), name))


def constant_bn(seed: int = 0, c: int = 8) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    var = (10 ** rng.uniform(6, 7.5, c)).astype(np.float32)
    var[0] = 9.8e7
    mean = (100 * rng.standard_normal(c)).astype(np.float32)
    nodes = [
        _const("conv.w", rng.standard_normal((c, 3, 3, 3)) * 0.3),
        _const("bn.scale", 1 + 0.1 * rng.standard_normal(c)),
        _const("bn.bias", 0.1 * rng.standard_normal(c)),
        _const("bn.mean", mean),
        _const("bn.var", var),
        helper.make_node("Conv", ["image", "conv.w"], ["c1"], name="conv", pads=[1] * 4),
        helper.make_node("Mul", ["c1", "gain"], ["c1g"], name="gain_mul"),
        helper.make_node("BatchNormalization", ["c1g", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn_out"],
                         name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["bn_out"], ["out"], name="relu"),
    ]
    gain = numpy_helper.from_array(np.array([1000.0], np.float32), "gain")
    return make_model(nodes, [helper.make_tensor_value_info("image", T.FLOAT, ["n", 3, 8, 8])],
                      [helper.make_tensor_value_info("out", T.FLOAT, ["n", c, 8, 8])], [gain], opset=12)


def overflow_chain() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array([3e4], np.float32), "big"),
             numpy_helper.from_array(np.array([1.0], np.float32), "one")]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu_in"),
        helper.make_node("Mul", ["r", "big"], ["scaled"], name="scale_up"),
        helper.make_node("Add", ["scaled", "scaled"], ["doubled"], name="double"),
        helper.make_node("Div", ["doubled", "big"], ["back"], name="scale_down"),
        helper.make_node("Add", ["back", "one"], ["y"], name="tail"),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["n", 4])], inits)


def shared_weight() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.array([0.1, 0.2, 0.3, 1 / 3], np.float32), "w")
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"], name="keep_me"),
        helper.make_node("Mul", ["a", "w"], ["y"], name="half_me"),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["n", 4])], [w])


def transformer_mlp(layers: int = 2, d: int = 128, ff: int = 512, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def init(name: str, array) -> str:
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    x = "x"
    for i in range(layers):
        p = f"/layers.{i}"
        g, b = init(f"ln{i}.g", 1 + 0.1 * rng.standard_normal(d)), init(f"ln{i}.b", 0.1 * rng.standard_normal(d))
        w1, b1 = init(f"fc1_{i}.w", rng.standard_normal((d, ff)) / np.sqrt(d)), init(f"fc1_{i}.b", 0.02 * rng.standard_normal(ff))
        w2, b2 = init(f"fc2_{i}.w", rng.standard_normal((ff, d)) / np.sqrt(ff)), init(f"fc2_{i}.b", 0.02 * rng.standard_normal(d))
        nodes += [
            helper.make_node("LayerNormalization", [x, g, b], [f"{p}/ln"], name=f"{p}/ln/LayerNormalization", axis=-1),
            helper.make_node("MatMul", [f"{p}/ln", w1], [f"{p}/mm1"], name=f"{p}/fc1/MatMul"),
            helper.make_node("Add", [f"{p}/mm1", b1], [f"{p}/h1"], name=f"{p}/fc1/Add"),
            helper.make_node("Relu", [f"{p}/h1"], [f"{p}/a1"], name=f"{p}/act/Relu"),
            helper.make_node("MatMul", [f"{p}/a1", w2], [f"{p}/mm2"], name=f"{p}/fc2/MatMul"),
            helper.make_node("Add", [f"{p}/mm2", b2], [f"{p}/h2"], name=f"{p}/fc2/Add"),
            helper.make_node("Add", [x, f"{p}/h2"], [f"{p}/out"], name=f"{p}/residual/Add"),
        ]
        x = f"{p}/out"
    nodes.append(helper.make_node("MatMul", [x, init("head.w", rng.standard_normal((d, classes)) / np.sqrt(d))],
                                  ["features"], name="/head/MatMul"))
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", d])],
                      [helper.make_tensor_value_info("features", T.FLOAT, ["batch", "seq", classes])], inits)
