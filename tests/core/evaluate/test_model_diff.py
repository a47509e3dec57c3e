"""The before/after diff (evaluate.model_diff): ops, parameters and bytes per dtype, latency, accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.model_diff import diff_lines, model_diff, parameters_by_dtype, report_diff
from onnxport.core.evaluate.report import build_report, summary_lines
from onnxport.core.quantize.quantize import QuantizeOptions, quantize

from ..model_builders import make_model
from ..quant_models import outlier_mlp, save


def test_parameters_and_bytes_per_dtype_count_initializers_and_constants():
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    q = numpy_helper.from_array(np.ones((5,), np.int8), "q")
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((2, 2), np.float16)))
    nodes = [const, helper.make_node("MatMul", ["x", "w"], ["y"])]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [1, 3])], [w, q])
    values, nbytes = parameters_by_dtype(model)
    assert values == {"float32": 12, "int8": 5, "float16": 4}
    assert nbytes == {"float32": 48, "int8": 5, "float16": 8}


def test_diff_of_a_real_quantization_in_the_report(tmp_path):
    fp32 = Path(save(outlier_mlp(), tmp_path / "mlp.onnx"))
    q = quantize(fp32, tmp_path / "mlp.int8.onnx", "dynamic", QuantizeOptions(int8_path="avx2"))
    bench = benchmark([fp32, q.path], seconds=0.05, min_runs=3, warmup=0)
    report = build_report(export={"path": str(fp32)}, quantize=q, bench=bench)
    rows = {(r["section"], r["name"]): (r["before"], r["after"]) for r in report["diff"]["rows"]}
    before_ops = [n.op_type for n in onnx.load(fp32).graph.node]
    after_ops = [n.op_type for n in onnx.load(q.path).graph.node]
    assert rows[("ops", "MatMul")] == (before_ops.count("MatMul"), after_ops.count("MatMul"))
    assert rows[("ops", "all nodes")] == (len(before_ops), len(after_ops))
    assert rows[("ops", "DynamicQuantizeLinear")][0] == 0 and rows[("ops", "DynamicQuantizeLinear")][1] > 0
    assert rows[("parameters", "int8")][0] == 0 and rows[("parameters", "int8")][1] > 0
    assert rows[("bytes", "float32")][1] < rows[("bytes", "float32")][0]
    assert rows[("size", "file (with external data)")] == (q.source_size_bytes, q.size_bytes)
    assert rows[("latency", "p50 (ms)")] == pytest.approx((bench.models[0].p50_ms, bench.models[1].p50_ms), abs=1e-3)
    assert rows[("accuracy", "y (cosine)")] == pytest.approx((1.0, q.validation.outputs[0].cosine), abs=1e-6)
    json.dumps(report["diff"])
    text = "\n".join(summary_lines(report))
    assert "before/after:" in text and "mlp.int8.onnx" in text and "DynamicQuantizeLinear" in text
    assert any("int8" in line and "+" in line for line in diff_lines(report["diff"]))


def test_no_diff_without_a_pair_or_when_a_file_is_gone(tmp_path):
    fp32 = Path(save(outlier_mlp(), tmp_path / "mlp.onnx"))
    assert report_diff({"export": {"path": str(fp32)}}) is None
    pair = {"bench": {"models": [{"path": str(fp32)}, {"path": str(tmp_path / "gone.onnx")}]}}
    assert report_diff(pair) is None
    same = model_diff(fp32, fp32)
    assert all(r.before == r.after for r in same.rows) and not any(r.section == "latency" for r in same.rows)


def test_an_accuracy_change_below_six_decimals_is_no_change():
    """fp16's cosine can round to 0.99999996 or 1.0000001: never 'accuracy -0.000000' (in red)."""
    from onnxport.core.evaluate.model_diff import DiffRow, accuracy_delta

    tiny_loss, above_one = DiffRow("accuracy", "y (cosine)", 1.0, 0.99999996), DiffRow("accuracy", "y", 1.0, 1.0000001)
    assert tiny_loss.cells() == ("1.000000", "1.000000", "") and accuracy_delta(tiny_loss) == 0.0
    assert above_one.cells() == ("1.000000", "1.000000", "") and accuracy_delta(above_one) == 0.0
    assert DiffRow("accuracy", "y", 1.0, 0.999869).cells()[2] == "-0.000131"
