"""Quantization for real: every mode on an MLP, a CNN and a transformer encoder runs in ONNX Runtime
and validates against float32; calibration data is really used; the accuracy-target loop keeps the
nodes that miss in float and says which; a failure or cancel leaves nothing behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.evaluate.runtime import model_size, precision_of, session
from onnxport.core.evaluate.validate import validate
from onnxport.core.export.export import export_model
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.quantize import METADATA_KEY, QuantizeOptions, quantize, quantize_info, requantize
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, Reporter

from ..model_builders import eval_like_mlp, mlp_weights, param_set
from ..quant_models import cnn, encoder, outlier_mlp, save

QUANTIZED_MATMUL = {"MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
# Every int8 test pins the int8 path it asserts about: 7-bit weights, exact on every CPU's kernels
# (AVX2 without VNNI saturates with 8-bit ones), so no verdict here depends on the CPU running it.
PIN = "avx2"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """float32 inference models: an MLP exported by onnxport (Transpose'd weights folded), a CNN, an encoder."""
    d = tmp_path_factory.mktemp("models")
    mlp = d / "mlp.onnx"  # weights big enough that int8 makes the model smaller (else: "nothing gained")
    export_model(save(eval_like_mlp(d_hidden=256), d / "eval_model.onnx"), mlp, ["logits", "probabilities"],
                 param_set(mlp_weights(seed=5, d_hidden=256)))
    return {"mlp": mlp, "cnn": Path(save(cnn(c=48), d / "cnn.onnx")), "encoder": Path(save(encoder(), d / "encoder.onnx")),
            "outlier": Path(save(outlier_mlp(), d / "outlier.onnx"))}


def _ops(path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_random_mlp_int8_meets_the_target_on_held_out_inputs_or_writes_nothing(models, tmp_path, mode):
    """On random inputs, its random classifier flips an answer or two in 32 held-out samples, where
    the search's own 32 had none (argmax agreement >= 0.99 allows no flip): said, nothing written."""
    out = tmp_path / f"mlp.{mode}.onnx"
    try:
        result = quantize(models["mlp"], out, mode, QuantizeOptions(int8_path=PIN))
    except OnnxportError as exc:
        assert "not on held-out ones" in str(exc) and not out.exists()
        return
    assert result.validation.passed and "held out" in result.validation.inputs


@pytest.mark.parametrize(("name", "mode"), [(n, m) for n in ("mlp", "cnn", "encoder") for m in ("dynamic", "static",
                                             "fp16") if (n, m) not in {("cnn", "dynamic"), ("mlp", "dynamic"),
                                                                       ("mlp", "static")}])
def test_every_mode_runs_in_onnxruntime_and_meets_the_target(models, tmp_path, name, mode):
    out = tmp_path / f"{name}.{mode}.onnx"
    result = quantize(models[name], out, mode, QuantizeOptions(int8_path=PIN))
    assert result.path == out and out.is_file() and result.size_bytes == model_size(out)
    assert result.target == 0.99 and result.target_met is True
    model = onnx.load(str(out))
    assert precision_of(model) == ("float16" if mode == "fp16" else "quantized")
    ops = _ops(out)
    assert "ConvInteger" not in ops  # the CPU provider has no int8 ConvInteger
    if mode == "dynamic" and name != "cnn":
        assert ops & QUANTIZED_MATMUL
    if mode == "static":
        assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    sess = session(out)  # ONNX Runtime loads and runs it
    feed = {"mlp": {"input": np.ones((2, 8), np.float32)}, "cnn": {"image": np.ones((2, 3, 8, 8), np.float32)},
            "encoder": {"input_ids": np.arange(12).reshape(2, 6), "attention_mask": np.ones((2, 6), np.int64)}}[name]
    assert all(np.isfinite(o).all() for o in sess.run(None, feed))
    v = result.validation
    assert v.passed and v.reference == str(models[name]) and v.reference_kind == "model"
    assert v.precision == precision_of(model)
    assert all(o.cosine >= 0.99 for o in v.outputs)
    info = quantize_info(out)
    assert info["mode"] == mode and info["source"] == models[name].name
    assert not _leftovers(tmp_path)


def test_dynamic_cnn_keeps_conv_float_and_says_why(models, tmp_path):
    """Only its small final MatMul quantizes: 1.00x the size is no gain (gain.SMALLER), said so."""
    with pytest.raises(OnnxportError, match=r"dynamic quantization gains nothing: 1\.00x the size, not smaller"):
        quantize(models["cnn"], tmp_path / "c.onnx", "dynamic", QuantizeOptions(int8_path=PIN))
    assert not (tmp_path / "c.onnx").exists()
    with pytest.raises(OnnxportError, match="Conv"):
        quantize(models["cnn"], tmp_path / "c2.onnx", "dynamic",
                 QuantizeOptions(int8_path=PIN, op_types=["Conv"]))


def _scales_of_input(path, name: str) -> float:
    model = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == name)
    return float(inits[node.input[1]])


def test_static_calibration_from_npz_folder_and_generated(models, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((24, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", image=x)
    np.savez(tmp_path / "calib_x5.npz", image=5 * x)
    folder = tmp_path / "calib_npy"
    folder.mkdir()
    for i in range(3):
        np.save(folder / f"batch_{i}.npy", x[8 * i: 8 * i + 8])  # single-input model: one batch per file
    with_npz = quantize(models["cnn"], tmp_path / "npz.onnx", "static",
                        QuantizeOptions(int8_path=PIN, calibration=tmp_path / "calib.npz"))
    with_x5 = quantize(models["cnn"], tmp_path / "x5.onnx", "static",
                       QuantizeOptions(int8_path=PIN, calibration=tmp_path / "calib_x5.npz",
                                       accuracy_target=None))
    generated = quantize(models["cnn"], tmp_path / "gen.onnx", "static", QuantizeOptions(int8_path=PIN))
    assert any("generated" in n for n in generated.notes) and not any("generated" in n for n in with_npz.notes)
    s1, s5 = _scales_of_input(with_npz.path, "image"), _scales_of_input(with_x5.path, "image")
    assert s5 == pytest.approx(5 * s1, rel=1e-4)  # the ranges come from the data given
    # the validation defaults to the calibration data when no validation inputs are given
    assert with_npz.validation.inputs.startswith("calib.npz") and with_npz.validation.passed
    with_folder = quantize(models["cnn"], tmp_path / "folder.onnx", "static",
                           QuantizeOptions(int8_path=PIN, calibration=folder))
    assert _scales_of_input(with_folder.path, "image") == pytest.approx(s1, rel=1e-5)


def test_static_encoder_per_channel_with_an_npy_per_input_folder(models, tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "tokens"
    folder.mkdir()
    np.save(folder / "input_ids.npy", rng.integers(0, 50, (16, 10)).astype(np.int64))
    np.save(folder / "attention_mask.npy", np.ones((16, 10), np.int64))
    result = quantize(models["encoder"], tmp_path / "enc.qdq.onnx", "static",
                      QuantizeOptions(int8_path=PIN, calibration=folder, per_channel=True))
    assert result.validation.passed and result.validation.inputs.startswith("tokens/")
    assert result.options["per_channel"] is True
    scales = [numpy_helper.to_array(t) for t in onnx.load(str(result.path)).graph.initializer
              if t.name.endswith("_scale") and t.dims]
    assert any(s.size > 1 for s in scales)  # one scale per output channel


def test_calibration_memory_is_bounded_and_ranges_merge_across_chunks(models, tmp_path):
    """The calibrator sees at most MAX_HELD_BATCHES batches at a time, yet the range of a tensor whose
    extreme value is only in the last batch is still the global one (ORT's own option drops it)."""
    x = np.random.default_rng(2).uniform(-1, 1, (40, 3, 8, 8)).astype(np.float32)
    x[-1, 0, 0, 0] = 9.0
    np.savez(tmp_path / "c.npz", image=x)
    feeds = open_feeds(tmp_path / "c.npz", input_specs(onnx.load(str(models["cnn"]))), batch_size=4)
    assert len(feeds) == 10
    ranges = calibrate(models["cnn"], feeds, ["Conv", "Relu"], tmp_path, Reporter())
    low, high = (float(np.asarray(v).reshape(-1)[0]) for v in ranges["image"].range_value)
    assert high == pytest.approx(9.0) and low == pytest.approx(float(x.min()))


def test_fp16_keep_io_types_or_not(models, tmp_path):
    kept = quantize(models["encoder"], tmp_path / "keep.onnx", "fp16")
    half = quantize(models["encoder"], tmp_path / "half.onnx", "fp16", QuantizeOptions(keep_io_types=False))
    for result, out_type in ((kept, onnx.TensorProto.FLOAT), (half, onnx.TensorProto.FLOAT16)):
        graph = onnx.load(str(result.path)).graph
        assert {o.type.tensor_type.elem_type for o in graph.output} == {out_type}
        assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64  # ids stay ints
        assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in graph.initializer)
        assert result.validation.passed
    mlp = quantize(models["mlp"], tmp_path / "mlp16.onnx", "fp16", QuantizeOptions(keep_io_types=False))
    sess = session(mlp.path)
    assert sess.get_inputs()[0].type == "tensor(float16)"
    assert sess.run(None, {"input": np.ones((1, 8), np.float16)})[0].dtype == np.float16
    assert kept.size_ratio < 0.75 and half.size_ratio < 0.75  # weights in half precision


def test_fp16_block_ops_stay_float32(models, tmp_path):
    result = quantize(models["cnn"], tmp_path / "cnn16.onnx", "fp16", QuantizeOptions(block_ops=["Gemm"]))
    model = onnx.load(str(result.path))
    inits = {t.name: t.data_type for t in model.graph.initializer}
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    assert inits[gemm.input[1]] == onnx.TensorProto.FLOAT
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    assert inits[conv.input[1]] == onnx.TensorProto.FLOAT16


def test_accuracy_target_loop_keeps_the_sensitive_node_in_float(models, tmp_path):
    """One huge hidden channel ruins per-tensor int8 activations of fc2 only: the loop finds fc2."""
    plain = quantize(models["outlier"], tmp_path / "plain.onnx", "dynamic",
                     QuantizeOptions(int8_path=PIN, accuracy_target=None))
    assert plain.target_met is None and plain.kept_float_nodes == []
    assert plain.validation.min_cosine < 0.99 and not plain.validation.passed
    assert plain.validation.worst_nodes(1) == ["fc2/MatMul"]  # the layer report points at it

    result = quantize(models["outlier"], tmp_path / "target.onnx", "dynamic", QuantizeOptions(int8_path=PIN))
    assert result.kept_float_nodes == ["fc2/MatMul"]
    assert result.target_met and result.validation.min_cosine >= 0.99
    assert len(result.attempts) == 2 and not result.attempts[0]["passed"] and result.attempts[1]["passed"]
    assert result.attempts[0]["min_cosine"] < 0.99 <= result.attempts[1]["min_cosine"]
    fc2 = next(n for n in onnx.load(str(result.path)).graph.node if n.name == "fc2/MatMul")
    assert fc2.op_type == "MatMul"  # still float
    assert QUANTIZED_MATMUL & _ops(result.path)  # the others are quantized
    assert quantize_info(result.path)["kept_float_nodes"] == ["fc2/MatMul"]
    assert any("fc2/MatMul" in line for line in result.summary_lines())


def test_tight_target_keeps_more_nodes_until_met(models, tmp_path):
    result = quantize(models["encoder"], tmp_path / "tight.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, accuracy_target=0.99995))
    assert result.kept_float_nodes, "a 0.99995 target must need nodes kept in float"
    assert result.target_met and result.validation.min_cosine >= 0.99995
    cosines = [a["min_cosine"] for a in result.attempts]
    assert cosines[0] < 0.99995 <= cosines[-1]
    assert [len(a["kept_float_nodes"]) for a in result.attempts] == sorted(len(a["kept_float_nodes"])
                                                                          for a in result.attempts)
    kept_ops = {n.op_type for n in onnx.load(str(result.path)).graph.node if n.name in result.kept_float_nodes}
    assert kept_ops <= {"MatMul", "Gather", "Gemm"}


def test_missed_target_writes_nothing_and_keeps_the_existing_file(models, tmp_path, monkeypatch):
    import onnxport.core.quantize.search as search_module

    monkeypatch.setattr(search_module, "MAX_ROUNDS", 0)  # no second try: the first attempt misses
    out = tmp_path / "q.onnx"
    out.write_bytes(b"precious")
    with pytest.raises(OnnxportError, match=r"misses the accuracy target \(cosine 0\.\d+ < 0.99.*nothing written"):
        quantize(models["outlier"], out, "dynamic", QuantizeOptions(int8_path=PIN))
    assert out.read_bytes() == b"precious" and not _leftovers(tmp_path)


def test_static_keeps_the_producer_of_a_sensitive_input_in_float_too(models, tmp_path):
    """Padded tokens put -1e4 in the attention scores: int8 of the Softmax input ruins the
    attention. Keeping only Softmax float would still read that edge through Q/DQ; its
    producer (the mask Add) is kept too: the static search measures units that carry the
    producers of their inputs, and picks the one holding both (here the attention scores' segment).
    By default static quantizes only the weight ops (Softmax, Add float): the op types are asked for."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 50, (16, 10)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[:, 7:] = 0
    np.savez(tmp_path / "padded.npz", input_ids=ids, attention_mask=mask)
    every = ["MatMul", "Gemm", "Add", "Softmax"]
    plain = quantize(models["encoder"], tmp_path / "plain.onnx", "static",
                     QuantizeOptions(int8_path=PIN, calibration=tmp_path / "padded.npz",
                                     accuracy_target=None, op_types=every))
    assert plain.validation.min_cosine < 0.99 and plain.validation.worst_nodes(1) == ["/attn/Softmax"]
    result = quantize(models["encoder"], tmp_path / "enc.qdq.onnx", "static",
                      QuantizeOptions(int8_path=PIN, calibration=tmp_path / "padded.npz", op_types=every))
    assert {"/attn/Softmax", "/attn/Add_mask"} <= set(result.kept_float_nodes)
    assert not {"/ffn/in/MatMul", "/ffn/out/MatMul"} & set(result.kept_float_nodes)  # the rest stays int8
    assert result.target_met and result.validation.passed and "padded.npz" in result.validation.inputs


@pytest.mark.parametrize("after", [1, 4, 8])
def test_cancel_leaves_no_file_and_never_touches_an_existing_one(models, tmp_path, after):
    out = tmp_path / "q.onnx"
    out.write_bytes(b"old")
    token = CancelToken()
    seen = []

    def progress(fraction, message):
        seen.append(message)
        if len(seen) >= after:
            token.cancel()

    with pytest.raises(Cancelled):
        quantize(models["encoder"], out, "static", QuantizeOptions(int8_path=PIN, accuracy_target=0.99995),
                 progress=progress, cancel=token)
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.onnx"]


def test_bad_inputs_are_one_line_errors(models, tmp_path):
    with pytest.raises(OnnxportError, match="unknown quantization mode"):
        quantize(models["mlp"], tmp_path / "x.onnx", "int2")
    with pytest.raises(OnnxportError, match="overwrite the source"):
        quantize(models["mlp"], models["mlp"], "dynamic", QuantizeOptions(int8_path=PIN))
    with pytest.raises(OnnxportError, match="accuracy target"):
        quantize(models["mlp"], tmp_path / "x.onnx", "dynamic",
                 QuantizeOptions(int8_path=PIN, accuracy_target=1.5))
    with pytest.raises(OnnxportError, match="fc2/MatMu.*did you mean"):
        quantize(models["outlier"], tmp_path / "x.onnx", "dynamic",
                 QuantizeOptions(int8_path=PIN, exclude_nodes=["fc2/MatMu"]))
    bad = tmp_path / "bad.npz"
    np.savez(bad, wrong_name=np.zeros((2, 3, 8, 8), np.float32))
    with pytest.raises(OnnxportError, match="bad.npz|image"):
        quantize(models["cnn"], tmp_path / "x.onnx", "static",
                 QuantizeOptions(int8_path=PIN, calibration=bad))
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model at all")
    with pytest.raises(OnnxportError, match="garbage.onnx"):
        quantize(garbage, tmp_path / "x.onnx", "dynamic", QuantizeOptions(int8_path=PIN))
    assert not (tmp_path / "x.onnx").exists() and not _leftovers(tmp_path)


def test_excluded_nodes_stay_float_and_requantize_adds_more(models, tmp_path):
    first = quantize(models["encoder"], tmp_path / "a.onnx", "dynamic",
                     QuantizeOptions(int8_path=PIN, exclude_nodes=["/ffn/out/MatMul"], accuracy_target=None))
    assert first.excluded_nodes == ["/ffn/out/MatMul"]
    by_name = {n.name: n.op_type for n in onnx.load(str(first.path)).graph.node}
    assert by_name["/ffn/out/MatMul"] == "MatMul"
    report = validate(first.path, models["encoder"], layers=True)
    worst = report.worst_nodes(2)
    assert worst and "/ffn/out/MatMul" not in worst
    second = requantize(first.path, models["encoder"], tmp_path / "b.onnx", worst, QuantizeOptions(int8_path=PIN))
    assert set(second.excluded_nodes) == {"/ffn/out/MatMul", *worst}
    assert second.options["int8_path"] == PIN  # the options given reach the run; the recorded ones replace them
    info = json.loads(next(p.value for p in onnx.load(str(second.path)).metadata_props if p.key == METADATA_KEY))
    assert set(info["excluded_nodes"]) == set(second.excluded_nodes)
    assert second.validation.min_cosine >= first.validation.min_cosine - 1e-4
    with pytest.raises(OnnxportError, match="not quantized by onnxport"):
        requantize(models["encoder"], models["encoder"], tmp_path / "c.onnx", [])


def test_broken_quantized_model_fails_validation(models, tmp_path):
    result = quantize(models["mlp"], tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, accuracy_target=None))
    model = onnx.load(str(result.path))
    weights = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2]
    for t in weights:
        a = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a[:, ::-1]), t.name))  # scramble the weights
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    report = validate(broken, models["mlp"])
    assert report.precision == "quantized" and not report.passed
    assert report.outputs[0].cosine < 0.9 and "cosine" in report.outputs[0].reason
    assert validate(result.path, models["mlp"]).passed
