"""Weights and calibration values no quantization scale fits are refused in one line before ONNX
Runtime's quantizer sees them (issue 36: `AssertionError: scale issue` on all-NaN/all-Inf weights or
calibration data, `ValueError: zero-size array` on a weight with no values)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.quantize.finite_values import check_weights
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.errors import OnnxportError


def matmul_model(w: np.ndarray, before: str | None = None) -> onnx.ModelProto:
    """x [batch, K] (-> `before`, e.g. Exp) -> MatMul by `w` (node 'mm') -> y."""
    x = helper.make_tensor_value_info("x", T.FLOAT, ["batch", w.shape[0]])
    y = helper.make_tensor_value_info("y", T.FLOAT, ["batch", w.shape[1]])
    nodes = [helper.make_node(before, ["x"], ["h"], name="pre")] if before else []
    nodes.append(helper.make_node("MatMul", ["h" if before else "x", "w"], ["y"], name="mm"))
    graph = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def save(model: onnx.ModelProto, path):
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("mode", ["dynamic", "static", "int4"])
def test_non_finite_weights_are_refused_naming_weight_and_node(tmp_path, capsys, value, mode):
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    w[3, 5] = value
    source = save(matmul_model(w), tmp_path / "m.onnx")
    assert main(["quantize", str(source), "-o", str(tmp_path / "q.onnx"), "--mode", mode,
                 "--calibration", "generated"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "scale issue" not in err
    assert "weight 'w' [64, 64] of MatMul node 'mm' holds NaN or Inf" in err and "--exclude mm" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_a_weight_without_values_is_refused(tmp_path):
    source = save(matmul_model(np.zeros((64, 0), np.float32)), tmp_path / "m.onnx")
    with pytest.raises(OnnxportError, match=r"weight 'w' \[64, 0\] of MatMul node 'mm' holds no values"):
        quantize(source, tmp_path / "q.onnx", "dynamic")


def test_excluded_nodes_and_other_op_types_are_not_checked(tmp_path):
    model = matmul_model(np.full((4, 4), np.nan, np.float32))
    check_weights(model, tmp_path, ["MatMul"], ["mm"], "m.onnx")  # kept float by the user
    check_weights(model, tmp_path, ["Conv"], [], "m.onnx")  # not quantized in this mode
    with pytest.raises(OnnxportError, match="of MatMul node 'mm'"):
        check_weights(model, tmp_path, ["MatMul"], [], "m.onnx")


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_calibration_data_is_refused(tmp_path, value):
    source = save(matmul_model(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)),
                  tmp_path / "m.onnx")
    np.savez(tmp_path / "cal.npz", x=np.full((32, 16), value, np.float32))
    with pytest.raises(OnnxportError, match="calibration input 'x' holds NaN or Inf"):
        quantize(source, tmp_path / "q.onnx", "static", QuantizeOptions(calibration=str(tmp_path / "cal.npz")))
    assert not (tmp_path / "q.onnx").exists()


def test_a_model_computing_inf_from_finite_data_names_the_tensor(tmp_path):
    source = save(matmul_model(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32), "Exp"),
                  tmp_path / "m.onnx")
    np.savez(tmp_path / "cal.npz", x=np.full((32, 16), 100.0, np.float32))  # exp(100) is inf in float32
    with pytest.raises(OnnxportError, match="tensor '[hy]' takes values from .* no int8 scale fits NaN or Inf"):
        quantize(source, tmp_path / "q.onnx", "static", QuantizeOptions(calibration=str(tmp_path / "cal.npz")))
