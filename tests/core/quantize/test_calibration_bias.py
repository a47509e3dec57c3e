"""Bias correction for static QDQ: the rounded weights are exactly ORT's, the shift is absorbed, and
nodes kept in float, biases the graph computes and weights that are inputs are left alone."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.graph.passes import REWRITTEN
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import modes
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.calibration_bias import correct_biases, input_means, rounded_weight
from onnxport.core.util.progress import Reporter


def _weights(rng, shape) -> np.ndarray:
    """Small weights plus one large one per output channel: a coarse int8 scale, so rounding errors
    that do not cancel (as a folded batch norm makes them)."""
    w = rng.normal(0, 0.02, shape).astype(np.float32)
    w.reshape(shape[0], -1)[:, 0] = 1.0
    return w


def _model(path, *, bias: bool = True, depthwise: bool = True) -> None:
    """x [N, 4, 8, 8] -> Conv 3x3 (8 out, bias) -> Relu -> depthwise Conv 3x3 (no bias) -> y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(_weights(rng, (8, 4, 3, 3)), "w1"),
             numpy_helper.from_array(_weights(rng, (8, 1, 3, 3)), "w2")]
    conv1_inputs = ["x", "w1"] + (["b1"] if bias else [])
    if bias:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "b1"))
    nodes = [helper.make_node("Conv", conv1_inputs, ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1")]
    if depthwise:
        nodes.append(helper.make_node("Conv", ["r1", "w2"], ["y"], name="dw", group=8, pads=[1, 1, 1, 1]))
    else:
        nodes.append(helper.make_node("Identity", ["r1"], ["y"], name="id"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4, 8, 8])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 8, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _feeds(path, count=4, seed=1):
    x = (1.0 + np.random.default_rng(seed).normal(0, 0.3, (count, 4, 8, 8))).astype(np.float32)  # mean far from 0
    half = count // 2
    return open_feeds([{"x": x[:half]}, {"x": x[half:]}], input_specs(load_graph(path))), x  # two batches


def _run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("reduce_range", [True, False])
def test_rounded_weights_are_what_the_qdq_quantizer_writes(tmp_path, per_channel, reduce_range):
    _model(tmp_path / "m.onnx")
    feeds, _ = _feeds(tmp_path / "m.onnx")
    ranges = calibrate(tmp_path / "m.onnx", feeds, ["Conv"], tmp_path, Reporter(None, None))
    modes.static(tmp_path / "m.onnx", tmp_path / "q.onnx", tensors_range=ranges, op_types=["Conv"],
                 per_channel=per_channel, reduce_range=reduce_range, exclude=[], big=False)
    q = onnx.load(tmp_path / "q.onnx")
    values = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    dq = next(n for n in q.graph.node if n.op_type == "DequantizeLinear" and n.output[0].startswith("w1"))
    stored, scale, zero = (values[i] for i in dq.input)
    if per_channel:
        scale, zero = scale.reshape(-1, 1, 1, 1), zero.reshape(-1, 1, 1, 1)
    ours = rounded_weight(numpy_helper.to_array(onnx.load(tmp_path / "m.onnx").graph.initializer[0]),
                          0 if per_channel else None, reduce_range)
    np.testing.assert_allclose(ours, (stored.astype(np.float64) - zero) * scale, rtol=0, atol=1e-9)
    assert np.abs(stored).max() <= (64 if reduce_range else 127)


def _corrected(src, dst, means, **kwargs) -> int:
    """Runs the checked pass on `src`'s model, writes it to `dst`; how many biases it corrected."""
    model = onnx.load(src)
    result = correct_biases(model, means, **kwargs)
    assert result.model is model and result.changed == bool(result.changes)
    onnx.save(model, dst)
    return len(result.names(REWRITTEN))


def test_the_corrected_model_keeps_the_float_means(tmp_path):
    _model(tmp_path / "m.onnx")
    feeds, x = _feeds(tmp_path / "m.onnx")
    ranges = calibrate(tmp_path / "m.onnx", feeds, ["Conv"], tmp_path, Reporter(None, None))
    means = input_means(tmp_path / "m.onnx", feeds, tmp_path, Reporter(None, None))
    assert set(means.by_node) == {"conv1", "dw"} and means.batches == 2
    np.testing.assert_allclose(means.by_node["conv1"], x.mean(axis=(0, 2, 3)), rtol=1e-5)
    assert _corrected(tmp_path / "m.onnx", tmp_path / "c.onnx", means, per_channel=True, reduce_range=True) == 2
    for src, dst in (("m.onnx", "plain.qdq.onnx"), ("c.onnx", "corrected.qdq.onnx")):
        modes.static(tmp_path / src, tmp_path / dst, tensors_range=ranges, op_types=["Conv"], per_channel=True,
                     reduce_range=True, exclude=[], big=False)
    _, held_out = _feeds(tmp_path / "m.onnx", count=8, seed=7)
    want = _run(tmp_path / "m.onnx", held_out).mean(axis=(0, 2, 3))
    plain = np.abs(_run(tmp_path / "plain.qdq.onnx", held_out).mean(axis=(0, 2, 3)) - want).mean()
    corrected = np.abs(_run(tmp_path / "corrected.qdq.onnx", held_out).mean(axis=(0, 2, 3)) - want).mean()
    assert corrected < plain / 3, (corrected, plain)
    written = onnx.load(tmp_path / "c.onnx")
    dw = next(n for n in written.graph.node if n.name == "dw")
    assert len(dw.input) == 3 and dw.input[2] in {i.name for i in written.graph.initializer}  # a bias added
    onnx.checker.check_model(written)


def test_excluded_nodes_and_graph_computed_weights_are_left_alone(tmp_path):
    _model(tmp_path / "m.onnx", depthwise=False)
    feeds, _ = _feeds(tmp_path / "m.onnx")
    means = input_means(tmp_path / "m.onnx", feeds, tmp_path, Reporter(None, None))
    assert _corrected(tmp_path / "m.onnx", tmp_path / "c.onnx", means, per_channel=True, reduce_range=True,
                      exclude=["conv1"]) == 0
    before, after = (numpy_helper.to_array(next(i for i in onnx.load(tmp_path / p).graph.initializer
                                                if i.name == "b1")) for p in ("m.onnx", "c.onnx"))
    np.testing.assert_array_equal(before, after)

    model = onnx.load(tmp_path / "m.onnx")  # the weight as a graph input: ORT's QDQ treats it as an activation
    w1 = next(i for i in model.graph.initializer if i.name == "w1")
    model.graph.initializer.remove(w1)
    model.graph.input.append(helper.make_tensor_value_info("w1", T.FLOAT, [8, 4, 3, 3]))
    onnx.save(model, tmp_path / "input_weight.onnx")
    feeds = open_feeds({"x": np.ones((2, 4, 8, 8), np.float32), "w1": numpy_helper.to_array(w1)},
                       input_specs(load_graph(tmp_path / "input_weight.onnx")))
    means = input_means(tmp_path / "input_weight.onnx", feeds, tmp_path, Reporter(None, None))
    assert means.by_node == {}
