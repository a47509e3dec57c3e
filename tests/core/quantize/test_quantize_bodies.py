"""Quantizing models whose weights sit inside If bodies (body_models.py): dynamic int8 reaches into
the bodies (MatMul and LSTM), the accuracy search can keep body nodes in float, int4 quantizes a
body MatMul, static QDQ (main graph only) says in one line what it cannot do, and the "nothing to
quantize" check counts what bodies hold. Everything runs in ONNX Runtime and passes onnx.checker."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.evaluate.runtime import precision_of
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import gain, modes
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.fp16_convert import to_float16
from onnxport.core.quantize.int4 import int4
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

from . import body_models

PIN = "avx2"  # 7-bit weights: exact on every CPU's int8 kernels


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _body_ops(path) -> Counter:
    model = onnx.load(str(path))
    graphs = list(gain.all_graphs(model))[1:]
    return Counter(n.op_type for g in graphs for n in g.node)


def _matches_float(got_path, float_path, min_cosine: float) -> None:
    got = ort.InferenceSession(str(got_path), providers=["CPUExecutionProvider"])
    want = ort.InferenceSession(str(float_path), providers=["CPUExecutionProvider"])
    for feed in body_models.feeds():  # both branches
        assert _cosine(got.run(None, feed)[0], want.run(None, feed)[0]) >= min_cosine


@pytest.fixture
def src(tmp_path):
    return lambda **kw: body_models.save(body_models.if_model(**kw), tmp_path / "float.onnx")


@pytest.mark.parametrize("top", [False, True], ids=["bodies-only", "with-main-graph-matmul"])
def test_dynamic_quantizes_matmul_and_lstm_inside_the_bodies(src, tmp_path, top):
    source = src(top=top)
    out = tmp_path / "dyn.onnx"
    result = quantize(source, out, "dynamic",
                      QuantizeOptions(int8_path=PIN, validation_inputs=body_models.feeds()))
    inside = _body_ops(out)
    assert inside["MatMulInteger"] == 2 and inside["DynamicQuantizeLSTM"] == 1
    assert "MatMul" not in inside and "LSTM" not in inside
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)  # sorted, com.microsoft declared
    assert result.size_bytes < 0.4 * result.source_size_bytes
    assert result.target_met and all(o.cosine >= 0.99 for o in result.validation.outputs)
    assert precision_of(onnx.load(str(out))) == "quantized"  # judged as lossy by validate, bodies seen
    _matches_float(out, source, 0.999)


def test_the_accuracy_search_keeps_nodes_inside_bodies_in_float(src, tmp_path):
    out = tmp_path / "dyn.onnx"
    result = quantize(src(top=True), out, "dynamic",
                      QuantizeOptions(int8_path=PIN, validation_inputs=body_models.feeds(),
                                      accuracy_target=0.99995))  # int8 alone gives ~0.9997 here
    assert result.search["candidates"] == 4  # top/mm, then/mm1, then/mm2, else/lstm
    assert {"then/mm1", "then/mm2"} & set(result.kept_float_nodes)
    inside = _body_ops(out)
    assert inside["MatMul"] == len({"then/mm1", "then/mm2"} & set(result.kept_float_nodes))
    assert result.target_met and min(o.cosine for o in result.validation.outputs) >= 0.99995


def test_a_body_node_can_be_kept_in_float_by_name(src, tmp_path):
    out = tmp_path / "dyn.onnx"
    result = quantize(src(), out, "dynamic",
                      QuantizeOptions(int8_path=PIN, exclude_nodes=["else/lstm"], accuracy_target=None,
                                      validation_inputs=body_models.feeds()))
    inside = _body_ops(out)
    assert inside["LSTM"] == 1 and inside["DynamicQuantizeLSTM"] == 0 and inside["MatMulInteger"] == 2
    assert result.excluded_nodes == ["else/lstm"]
    with pytest.raises(OnnxportError, match="no node named 'else/lstn' to keep in float; did you mean 'else/lstm'"):
        quantize(src(), tmp_path / "x.onnx", "dynamic",
                 QuantizeOptions(int8_path=PIN, exclude_nodes=["else/lstn"]))


def test_static_says_in_one_line_that_it_cannot_quantize_inside_bodies(src, tmp_path):
    out = tmp_path / "static.onnx"
    with pytest.raises(OnnxportError) as err:
        quantize(src(), out, "static", QuantizeOptions(int8_path=PIN, validation_inputs=body_models.feeds()))
    message = str(err.value)
    assert "\n" not in message and "cannot quantize inside If/Loop/Scan bodies" in message
    assert "2 MatMul, 1 LSTM" in message and "--mode dynamic" in err.value.hint and "fp16" in err.value.hint
    assert not list(tmp_path.glob("static*"))


def test_static_quantizes_the_main_graph_and_notes_the_body_ops_left_float(src, tmp_path):
    """The main graph's QDQ model (modes.static: what quantize() writes) passes the checker and matches;
    quantize() itself refuses it: with the body weights float it is 0.95x the size, which is no gain."""
    out = tmp_path / "static.onnx"
    with pytest.raises(OnnxportError, match=r"static quantization gains nothing: 0\.9\dx the size, barely smaller"):
        quantize(src(top=True), out, "static",
                 QuantizeOptions(int8_path=PIN, validation_inputs=body_models.feeds(),
                                 calibration=body_models.feeds()))
    assert not out.exists()
    note = gain.static_reach("float.onnx", onnx.load(str(src(top=True))))
    assert note.startswith("3 op(s) inside If/Loop/Scan bodies stay float (2 MatMul, 1 LSTM)")
    specs = input_specs(load_graph(src(top=True)))
    ranges = calibrate(src(top=True), open_feeds(body_models.feeds(), specs), ["MatMul"], tmp_path,
                       Reporter(None, None))
    modes.static(src(top=True), out, tensors_range=ranges, op_types=None, per_channel=False, reduce_range=True,
                 exclude=[], big=False)
    top = Counter(n.op_type for n in onnx.load(str(out)).graph.node)
    assert top["QuantizeLinear"] and top["DequantizeLinear"]
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    _matches_float(out, src(top=True), 0.999)


def test_int4_quantizes_a_large_matmul_inside_a_body(src, tmp_path):
    source = src(top=True)
    out = tmp_path / "int4.onnx"
    chosen = int4(source, out, exclude=["then/mm2"], min_elements=4096)
    assert chosen == ["top/mm", "then/mm1"]
    inside = _body_ops(out)
    assert inside["MatMulNBits"] == 1 and inside["MatMul"] == 1  # then/mm2 excluded
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    _matches_float(out, source, 0.95)


def test_nothing_to_quantize_counts_what_the_bodies_hold(src, tmp_path):
    with pytest.raises(OnnxportError) as err:  # int4's default minimum is 16384 values: these are smaller
        quantize(src(), tmp_path / "int4.onnx", "int4",
                 QuantizeOptions(validation_inputs=body_models.feeds()))
    message = str(err.value)
    assert "int4 quantization found nothing to quantize (it has 2 MatMul, 1 LSTM inside If/Loop/Scan bodies)" in message
    assert "\n" not in message
    model = body_models.if_model(top=True)
    top, inside = gain.heavy_ops(model)
    assert top == Counter({"MatMul": 1}) and inside == Counter({"MatMul": 2, "LSTM": 1})
    converted = body_models.if_model(top=True)
    for graph in list(gain.all_graphs(converted))[1:]:
        for t in graph.initializer:
            if t.name == "W1":
                t.data_type = onnx.TensorProto.FLOAT16  # a weight made low precision inside a body counts
    assert gain.quantized_nothing(model, model) and not gain.quantized_nothing(model, converted)


# --- fp16 ------------------------------------------------------------------------------------------

def _float_weights(model: onnx.ModelProto) -> dict[str, int]:
    """name -> element type of every weight (initializer or Constant) in every graph."""
    found = {}
    for graph in gain.all_graphs(model):
        found.update({t.name: t.data_type for t in graph.initializer})
        found.update({n.output[0]: a.t.data_type for n in graph.node if n.op_type == "Constant"
                      for a in n.attribute if a.name == "value"})
    return found


def _runs_like(model: onnx.ModelProto, source: onnx.ModelProto, min_cosine: float) -> None:
    onnx.checker.check_model(model, full_check=True)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = ort.InferenceSession(source.SerializeToString(), providers=["CPUExecutionProvider"])
    for feed in body_models.feeds():
        for g, w in zip(got.run(None, feed), want.run(None, feed), strict=True):
            assert g.dtype == w.dtype == np.float32 and _cosine(g, w) >= min_cosine


@pytest.mark.parametrize("constants", [False, True], ids=["body-initializers", "body-constants"])
def test_fp16_converts_the_weights_and_nodes_inside_the_bodies(constants):
    source = body_models.if_model(top=True, constants=constants)
    model = onnx.ModelProto()
    model.CopyFrom(source)
    assert to_float16(model).kept == {}
    weights = _float_weights(model)
    for name in ("Wtop", "W1", "W2", "lstm.W", "lstm.R", "lstm.B"):
        assert weights[name] == onnx.TensorProto.FLOAT16, name
    assert len(model.SerializeToString()) < 0.55 * len(source.SerializeToString())
    _runs_like(model, source, 0.9999)


def test_fp16_keeps_constant_weights_of_a_float_kept_body_node_bit_exact():
    source = body_models.if_model(constants=True)
    model = onnx.ModelProto()
    model.CopyFrom(source)
    kept = to_float16(model, keep={"then/mm2": "kept float32 on request"}).kept
    assert kept == {"then/mm2": "kept float32 on request"}
    weights = _float_weights(model)
    assert weights["W2"] == onnx.TensorProto.FLOAT and weights["W1"] == onnx.TensorProto.FLOAT16
    original = {n.output[0]: n for g in gain.all_graphs(source) for n in g.node if n.op_type == "Constant"}
    now = {n.output[0]: n for g in gain.all_graphs(model) for n in g.node if n.op_type == "Constant"}
    assert now["W2"].SerializeToString() == original["W2"].SerializeToString()
    _runs_like(model, source, 0.9999)


def test_fp16_keeps_a_body_node_whose_weight_is_beyond_float16():
    source = body_models.if_model(constants=True)
    for graph in gain.all_graphs(source):
        for node in graph.node:
            if node.op_type == "Constant" and node.output[0] == "W1":
                big = numpy_helper.to_array(node.attribute[0].t).copy()
                big[0, 0] = 1e6
                node.attribute[0].t.CopyFrom(numpy_helper.from_array(big, "W1"))
    model = onnx.ModelProto()
    model.CopyFrom(source)
    assert to_float16(model).kept == {"then/mm1": "weight 'W1' reaches 1e+06 (float16 max 65504)"}
    assert _float_weights(model)["W1"] == onnx.TensorProto.FLOAT
    _runs_like(model, source, 0.9999)


@pytest.mark.parametrize("outer_reader", [False, True], ids=["read-only-in-bodies", "read-outside-too"])
def test_fp16_converts_an_outer_weight_the_bodies_capture(outer_reader):
    source = body_models.captured_weight_model(outer_reader=outer_reader)
    model = onnx.ModelProto()
    model.CopyFrom(source)
    keep = {"outer/sum": "kept float32 on request"} if outer_reader else {}
    to_float16(model, keep=keep)
    wc = next(n for n in model.graph.node if n.output[0] == "Wc").attribute[0].t
    if outer_reader:  # the float32 reader outside keeps it bit-exact; the bodies cast what they read
        original = next(n for n in source.graph.node if n.output[0] == "Wc").attribute[0].t
        assert wc.SerializeToString() == original.SerializeToString()
    else:  # only float16 readers, all inside bodies: the weight itself is float16, no Cast in the bodies
        assert wc.data_type == onnx.TensorProto.FLOAT16
        assert not [n for g in list(gain.all_graphs(model))[1:] for n in g.node if n.op_type == "Cast"
                    and n.input[0] == "Wc"]
    _runs_like(model, source, 0.9999)


def test_fp16_mode_writes_a_smaller_model_with_converted_bodies(src, tmp_path):
    source = src(constants=True)
    out = tmp_path / "half.onnx"
    result = quantize(source, out, "fp16", QuantizeOptions(validation_inputs=body_models.feeds()))
    assert result.size_bytes < 0.55 * result.source_size_bytes
    assert result.target_met and all(o.cosine >= 0.9999 for o in result.validation.outputs)
    assert _body_ops(out)["Cast"] >= 2 and precision_of(onnx.load(str(out))) == "float16"
    _matches_float(out, source, 0.9999)


def test_fp16_keeping_an_if_in_float32_keeps_everything_it_holds():
    source = body_models.if_model(top=True, constants=True)
    model = onnx.ModelProto()
    model.CopyFrom(source)
    assert to_float16(model, keep={"branch": "kept float32 on request"}).kept == {"branch": "kept float32 on request"}
    weights = _float_weights(model)
    assert weights["Wtop"] == onnx.TensorProto.FLOAT16  # the main graph's MatMul still converts
    original = {n.output[0]: n for g in gain.all_graphs(source) for n in g.node if n.op_type == "Constant"}
    for graph in list(gain.all_graphs(model))[1:]:
        assert not [n for n in graph.node if n.op_type == "Cast"]
        for n in graph.node:
            if n.op_type == "Constant":
                assert n.SerializeToString() == original[n.output[0]].SerializeToString()
    _runs_like(model, source, 0.9999)
