"""The fp16 converter, int4 weight-only mode, domain tidying and calibration sources (quantize/*).

Each test runs the real thing (ONNX Runtime, onnx.checker) on small crafted models."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.quantize import fp16_mode, modes
from onnxport.core.quantize.domains import domains, drop_unused_domains
from onnxport.core.quantize.fp16_convert import to_float16
from onnxport.core.quantize.fp16_mode import beyond_float16
from onnxport.core.quantize.fp16_nodes import ATTR, FIXED, FOLLOW, FREE, node_slots, topological_order
from onnxport.core.quantize.int4 import int4
from onnxport.core.util.errors import OnnxportError

from .. import mode_models
from ..model_builders import make_model


def _run(model_or_path, feed: dict) -> np.ndarray:
    source = model_or_path.SerializeToString() if isinstance(model_or_path, onnx.ModelProto) else str(model_or_path)
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feed)[0]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


# --- fp16 ------------------------------------------------------------------------------------------

def test_fp16_keeps_constant_weights_of_a_float32_node_bit_exact():
    source = mode_models.constant_bn()
    feed = {"image": np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    model = _copy(source)
    kept = to_float16(model).kept
    assert kept == {"bn": "weight 'bn.var' reaches 9.8e+07 (float16 max 65504)"}
    onnx.checker.check_model(model, full_check=True)
    consts = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    original = {n.output[0]: n for n in source.graph.node if n.op_type == "Constant"}
    for name in ("bn.var", "bn.mean", "bn.scale", "bn.bias"):  # read by the float32 BatchNorm only
        assert consts[name].attribute[0].t.SerializeToString() == original[name].attribute[0].t.SerializeToString()
    assert consts["conv.w"].attribute[0].t.data_type == T.FLOAT16  # the Conv runs in float16
    assert _cosine(_run(model, feed), _run(source, feed)) > 0.9999


def test_fp16_without_the_rule_the_variance_would_be_clamped():
    """The test above can fail: the same model with BatchNorm forced to float16 loses its variance."""
    source = mode_models.constant_bn()
    feed = {"image": np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    from onnxruntime.transformers.float16 import convert_float_to_float16

    theirs = convert_float_to_float16(_copy(source), keep_io_types=True, node_block_list=["bn"])
    assert _cosine(_run(theirs, feed), _run(source, feed)) < 0.9


def test_fp16_casts_come_before_their_consumers_and_io_stays_float32():
    source = mode_models.transformer_mlp(layers=1, d=16, ff=32)
    model = _copy(source)
    to_float16(model, keep_io_types=True)
    onnx.checker.check_model(model, full_check=True)  # topological order: a Cast after its reader fails
    assert model.graph.input[0].type.tensor_type.elem_type == T.FLOAT
    assert model.graph.output[0].type.tensor_type.elem_type == T.FLOAT
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    out = _run(model, {"x": x})
    assert out.dtype == np.float32 and _cosine(out, _run(source, {"x": x})) > 0.999
    assert sum(t.data_type == T.FLOAT16 for t in model.graph.initializer) >= 5


def test_fp16_io_can_be_float16():
    model = mode_models.transformer_mlp(layers=1, d=16, ff=32)
    to_float16(model, keep_io_types=False)
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[0].type.tensor_type.elem_type == T.FLOAT16
    out = _run(model, {"x": np.ones((1, 3, 16), np.float16)})
    assert out.dtype == np.float16


def test_fp16_keeps_ops_whose_activations_overflow_in_float32():
    source = mode_models.overflow_chain()
    feed = {"x": np.array([[0.5, 1.0, 2.0, 3.0]], np.float32)}
    naive = _copy(source)
    to_float16(naive)
    # ORT's x86 CPU provider has no float16 Mul/Add/Div and runs them in float32 (inserted Casts), which
    # hides the overflow here; ARM CPUs with float16 arithmetic and GPUs do not. onnx's reference
    # evaluator computes in the declared types, as those do.
    from onnx.reference import ReferenceEvaluator

    def reference(model):
        return ReferenceEvaluator(model).run(None, feed)[0]

    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(reference(naive)).all()  # 3 * 3e4 * 2 = 1.8e5: inf in float16
    beyond = beyond_float16(source, [feed])
    assert set(beyond) == {"scale_up", "double", "scale_down"}
    assert beyond["double"] == "'doubled' reaches 1.8e+05 in float32 (float16 max 65504)"
    model = _copy(source)
    kept = to_float16(model, keep=beyond).kept
    assert set(kept) == set(beyond)
    np.testing.assert_allclose(reference(model), _run(source, feed), rtol=1e-3)
    np.testing.assert_allclose(_run(model, feed), _run(source, feed), rtol=1e-3)


def test_fp16_weight_read_by_both_kinds_gets_a_float16_copy():
    source = mode_models.shared_weight()
    model = _copy(source)
    kept = to_float16(model, keep={"keep_me": "kept float32 on request"}).kept
    assert kept == {"keep_me": "kept float32 on request"}
    inits = {t.name: t for t in model.graph.initializer}
    assert inits["w"].SerializeToString() == source.graph.initializer[0].SerializeToString()
    assert inits["w_fp16"].data_type == T.FLOAT16
    half = next(n for n in model.graph.node if n.name == "half_me")
    assert "w_fp16" in half.input
    x = np.ones((1, 4), np.float32)
    np.testing.assert_allclose(_run(model, {"x": x}), _run(source, {"x": x}), rtol=2e-3)


def test_fp16_sorts_a_graph_listed_out_of_order():
    model = mode_models.overflow_chain()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    assert topological_order(model.graph) == [4, 3, 2, 1, 0]
    to_float16(model)
    onnx.checker.check_model(model, full_check=True)


def test_fp16_leaves_subgraph_captures_float32():
    then_out = helper.make_tensor_value_info("t", T.FLOAT, None)
    else_out = helper.make_tensor_value_info("e", T.FLOAT, None)
    then_g = helper.make_graph([helper.make_node("Identity", ["h"], ["t"])], "then", [], [then_out])
    else_g = helper.make_graph([helper.make_node("Neg", ["h"], ["e"])], "else", [], [else_out])
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["h"], name="square"),
        helper.make_node("ReduceSum", ["h"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="positive"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    source = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                        [helper.make_tensor_value_info("y", T.FLOAT, [3])],
                        [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    model = _copy(source)
    to_float16(model)
    onnx.checker.check_model(model, full_check=True)
    square = next(n for n in model.graph.node if n.name == "square")
    assert square.output[0] != "h"  # runs in float16 under another name; 'h' is Cast back for the body
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(_run(model, {"x": x}), _run(source, {"x": x}), rtol=1e-3)


def test_fp16_slots_follow_the_schema():
    def classes(op, n_in, n_out, **attrs):
        node = helper.make_node(op, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)], **attrs)
        return node_slots(node, 17)

    resize = classes("Resize", 4, 1)
    assert (resize.input(0), resize.input(1), resize.input(2), resize.input(3)) == (FOLLOW, FREE, FIXED, FIXED)
    assert classes("Cast", 1, 1, to=1).outputs == (ATTR,) and classes("Cast", 1, 1, to=1).input(0) == FREE
    assert not classes("Shape", 1, 1).half_ok and classes("Shape", 1, 1).input(0) == FREE
    ln = classes("LayerNormalization", 3, 3)
    assert ln.outputs == (FOLLOW, FIXED, FIXED)
    assert classes("Concat", 5, 1, axis=0).input(4) == FOLLOW  # variadic
    assert not classes("RandomNormal", 0, 1, shape=[2]).half_ok
    assert node_slots(helper.make_node("FusedMatMul", ["a", "b"], ["c"], domain="com.microsoft"), 17) is None


def test_fp16_mode_records_what_it_kept_and_declares_only_used_domains(tmp_path):
    model = mode_models.constant_bn()
    model.opset_import.extend([helper.make_opsetid("com.microsoft", 1), helper.make_opsetid("ai.onnx.ml", 3)])
    src, dst = tmp_path / "m.onnx", tmp_path / "m.fp16.onnx"
    onnx.save(model, src)
    outcome = fp16_mode.fp16(src, dst, keep_io_types=True, block_ops=(), exclude=["relu"], big=False, beyond={})
    assert outcome.kept == {"bn": "weight 'bn.var' reaches 9.8e+07 (float16 max 65504)"}  # not the request
    assert outcome.notes() == ["kept float32, beyond float16's range: bn: weight 'bn.var' reaches 9.8e+07 "
                               "(float16 max 65504)"]
    written = onnx.load(dst)
    onnx.checker.check_model(written, full_check=True)
    assert [o.domain for o in written.opset_import] == [""]
    meta = json.loads(next(p.value for p in written.metadata_props if p.key == fp16_mode.FP16_METADATA_KEY))
    assert meta["kept_float32"] == {"bn": "weight 'bn.var' reaches 9.8e+07 (float16 max 65504)",
                                    "relu": "kept float32 on request"}


# --- domains ---------------------------------------------------------------------------------------

def test_drop_unused_domains_keeps_those_used_in_bodies_and_functions():
    body = helper.make_graph([helper.make_node("Gelu", ["x"], ["t"], domain="com.microsoft")], "b", [],
                             [helper.make_tensor_value_info("t", T.FLOAT, None)])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body),
             helper.make_node("MyFn", ["x"], ["z"], domain="local")]
    model = make_model(nodes, [helper.make_tensor_value_info("c", T.BOOL, []), helper.make_tensor_value_info("x", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None), helper.make_tensor_value_info("z", T.FLOAT, None)])
    fn = helper.make_function("local", "MyFn", ["a"], ["b"], [helper.make_node("Tanh", ["a"], ["b"], domain="inner")],
                              [helper.make_opsetid("", 17)])
    model.functions.append(fn)
    for domain in ("com.microsoft", "ai.onnx.ml", "local", "inner", "ai.onnx.training", "ai.onnx.preview.training"):
        model.opset_import.append(helper.make_opsetid(domain, 1))
    result = drop_unused_domains(model)
    assert result.changed and domains(result) == ["ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training"]
    assert [o.domain for o in model.opset_import] == ["", "com.microsoft", "local", "inner"]
    assert not drop_unused_domains(model).changed  # nothing left to drop: unchanged, said so


# --- int4 ------------------------------------------------------------------------------------------

def test_int4_quantizes_large_matmul_weights_only(tmp_path):
    src, dst = tmp_path / "m.onnx", tmp_path / "m.int4.onnx"
    onnx.save(mode_models.transformer_mlp(layers=2, d=128, ff=512), src)
    done = int4(src, dst, exclude=["/layers.1/fc2/MatMul"], block_size=32, big=False)
    assert done == ["/layers.0/fc1/MatMul", "/layers.0/fc2/MatMul", "/layers.1/fc1/MatMul"]
    model = onnx.load(dst)
    assert _ops(model).count("MatMulNBits") == 3
    assert {n.name for n in model.graph.node if n.op_type == "MatMul"} == {"/layers.1/fc2/MatMul", "/head/MatMul"}
    assert [o.domain for o in model.opset_import] == ["", "com.microsoft"]
    x = np.random.default_rng(0).standard_normal((2, 8, 128)).astype(np.float32)
    assert _cosine(_run(dst, {"x": x}), _run(src, {"x": x})) > 0.99
    assert dst.stat().st_size < 0.45 * src.stat().st_size  # 1 of 4 big weights still float32


def test_int4_refuses_an_unknown_block_size(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(mode_models.transformer_mlp(layers=1, d=64, ff=256), src)
    with pytest.raises(OnnxportError, match="block size must be one of"):
        int4(src, tmp_path / "o.onnx", exclude=[], block_size=48)


# --- static QDQ --------------------------------------------------------------------------------------

def test_static_per_channel_on_an_opset_11_model_loads(tmp_path):
    """ORT's QDQ quantizer writes DequantizeLinear(axis=...) even below opset 13, where ORT refuses it:
    the model is converted before calibration (the converter renames tensors the ranges must know)."""
    from onnxport.core.evaluate.feeds import input_specs, open_feeds
    from onnxport.core.quantize.calibration import calibrate
    from onnxport.core.util.progress import Reporter

    from ..quant_models import cnn

    model = cnn()
    model.opset_import[0].version = 11
    src, dst = tmp_path / "cnn11.onnx", tmp_path / "cnn11.qdq.onnx"
    onnx.save(model, src)
    feeds = open_feeds(None, input_specs(model), generate=2)
    ranges = calibrate(src, feeds, ["Conv", "Gemm"], tmp_path, Reporter(None, None))
    with pytest.raises(OnnxportError, match="needs opset 13 \\(this model has 11\\)"):
        modes.static(src, dst, tensors_range=ranges, op_types=["Conv", "Gemm"], per_channel=True,
                     reduce_range=False, exclude=[], big=False)
    notes: list[str] = []
    converted = modes.with_axis_opset(src, tmp_path / "cnn13.onnx", False, notes)
    assert notes == ["converted from opset 11 to 13 for per-channel weight scales"]
    ranges = calibrate(converted, feeds, ["Conv", "Gemm"], tmp_path, Reporter(None, None))
    modes.static(converted, dst, tensors_range=ranges, op_types=["Conv", "Gemm"], per_channel=True,
                 reduce_range=True, exclude=[], big=False)  # 7-bit weights: the cosine below holds on every CPU
    written = onnx.load(dst)
    assert written.opset_import[0].version == 13
    assert "DequantizeLinear" in _ops(written)
    feed = feeds.first()
    assert _cosine(_run(dst, feed), _run(src, feed)) > 0.99
    assert modes.with_axis_opset(converted, tmp_path / "again.onnx", False, notes) == converted


def test_int8_modes_declare_only_the_domains_they_use(tmp_path):
    """Eval graphs from ORT training declare com.microsoft, ai.onnx.training, ai.onnx.ml...; the quantizers
    kept every one of them, used or not."""
    from ..quant_models import encoder

    model = encoder()
    for domain in ("com.microsoft", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training", "com.ms.internal.nhwc"):
        model.opset_import.append(helper.make_opsetid(domain, 1))
    src, dst = tmp_path / "enc.onnx", tmp_path / "enc.int8.onnx"
    onnx.save(model, src)
    modes.dynamic(src, dst, op_types=None, per_channel=False, reduce_range=True, exclude=[], big=False)
    written = onnx.load(dst)
    used = {n.domain for n in written.graph.node} | {""}
    assert {o.domain for o in written.opset_import} == used
    assert "DynamicQuantizeLinear" in _ops(written) or "DynamicQuantizeMatMul" in _ops(written)


def test_fp16_converts_weights_an_old_model_also_lists_as_inputs():
    source = mode_models.transformer_mlp(layers=1, d=16, ff=32)
    source.ir_version = 3
    source.graph.input.extend(helper.make_tensor_value_info(t.name, T.FLOAT, list(t.dims)) for t in source.graph.initializer)
    model = _copy(source)
    to_float16(model)
    inputs = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    assert inputs["fc1_0.w"] == T.FLOAT16 and inputs["x"] == T.FLOAT
    assert {t.name: t.data_type for t in model.graph.initializer}["fc1_0.w"] == T.FLOAT16
    x = np.random.default_rng(0).standard_normal((1, 4, 16)).astype(np.float32)
    assert _cosine(_run(model, {"x": x}), _run(source, {"x": x})) > 0.999
