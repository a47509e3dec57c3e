"""Benchmarks for real: two models side by side in ONNX Runtime, p50/p90/throughput/size ratio."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.runtime import model_size
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

from ..model_builders import make_model
from ..quant_models import cnn, encoder, save


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    fp32 = Path(save(encoder(vocab=400, d=64, ff=256), d / "enc.onnx"))
    int8 = quantize(fp32, d / "enc.int8.onnx", "dynamic", QuantizeOptions(accuracy_target=None)).path
    return fp32, int8


def test_two_models_side_by_side(pair):
    """Structure only (figures depend on the machine): the same number of timings of each model,
    in paired blocks, and a ratio with its interval that the summary states as a verdict."""
    fp32, int8 = pair
    report = benchmark([fp32, int8], seconds=0.2, min_runs=5, warmup=1, dim_sizes={"sequence": 12})
    a, b = report.models
    for m, path in ((a, fp32), (b, int8)):
        assert m.path == str(path) and m.size_bytes == model_size(path)
        assert m.timed_samples >= 12 and m.runs == m.timed_samples * m.repeat  # >= 6 paired blocks
        assert 0 < m.min_ms <= m.p50_ms <= m.p90_ms
        assert m.batch == 1 and m.throughput == pytest.approx(1000.0 / m.p50_ms)
        assert m.load_seconds > 0
    assert a.timed_samples == b.timed_samples and report.ratio.blocks == a.timed_samples // 2  # A B B A blocks
    ratio = report.ratio
    assert ratio.low <= ratio.median <= ratio.high and report.latency_ratio == ratio.median
    assert report.size_ratio == pytest.approx(b.size_bytes / a.size_bytes) and report.size_ratio < 0.5
    assert report.speedup == pytest.approx(1 / report.latency_ratio)
    assert "input_ids[1, 12]" in report.inputs
    d = report.to_dict()
    assert d["size_ratio"] == round(report.size_ratio, 4) and len(d["models"]) == 2
    assert d["paired"]["blocks"] == ratio.blocks and d["verdict"] == ratio.verdict()
    assert f"  second vs first: size x{report.size_ratio:.3f}, {ratio.verdict()}" in report.summary_lines()


def test_inputs_from_a_file_and_batch(pair, tmp_path):
    fp32, _ = pair
    np.savez(tmp_path / "x.npz", input_ids=np.zeros((3, 7), np.int64), attention_mask=np.ones((3, 7), np.int64))
    report = benchmark([fp32], inputs=tmp_path / "x.npz", batch=3, seconds=0.05, min_runs=3, warmup=0)
    assert len(report.models) == 1 and report.models[0].batch == 3 and report.size_ratio is None
    assert report.inputs.startswith("x.npz")


def test_errors_and_cancel(pair, tmp_path):
    fp32, int8 = pair
    other = save(cnn(), tmp_path / "cnn.onnx")
    with pytest.raises(OnnxportError, match="needs input"):
        benchmark([fp32, other], seconds=0.05)
    with pytest.raises(OnnxportError, match="one or two"):
        benchmark([fp32, int8, fp32])
    with pytest.raises(OnnxportError, match="no such file"):
        benchmark([tmp_path / "missing.onnx"])
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        benchmark([fp32], seconds=5, cancel=token)


def test_a_model_onnxruntime_refuses_is_one_line(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper

    bad = make_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="n")],
                     [helper.make_tensor_value_info("x", T.FLOAT, [1])], [helper.make_tensor_value_info("y", T.FLOAT, [1])])
    path = save(bad, tmp_path / "bad.onnx")
    with pytest.raises(OnnxportError, match="bad.onnx: ONNX Runtime cannot run this model"):
        benchmark([path], seconds=0.05)
