"""SmoothQuant-style rescaling (smooth.py): exact in float, 1/s folded where it is free, a Mul only
where it pays."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.quantize.outlier_plan import channel_maxima
from onnxport.core.quantize.smooth import CLIP, TAG, factors, rescaled_count, smooth
from onnxport.core.quantize.weight_edits import RESCALED

from .test_outlier_split import LN_OUTLIER, _run, block_model, feeds


def _smoothed(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy, rescaled_count(smooth(copy, channel_maxima(model, feeds())))


def test_factors_balance_activation_and_weight_peaks():
    x, w = np.array([8.0, 2.0, 0.0, 1.0]), np.array([0.5, 0.5, 1.0, 0.0])
    s = factors(x, w, 0.5)
    assert s[2] == 1.0 and s[3] == 1.0  # a channel never seen, or with a zero row, is left as it is
    live = s[:2]
    assert np.isclose(np.exp(np.mean(np.log(live))), 1.0)  # geometric mean 1
    assert np.isclose((x[0] / s[0]) / (w[0] * s[0]), (x[1] / s[1]) / (w[1] * s[1]))  # same x/w balance
    assert factors(np.array([1e9, 1e-9]), np.array([1.0, 1.0]), 0.5).max() <= CLIP


def test_smoothing_is_exact_in_float_and_rescales_the_weight_rows():
    model = block_model()
    smoothed, count = _smoothed(model)
    assert count >= 2
    onnx.checker.check_model(smoothed, full_check=True)
    for feed in feeds(3, seed=11):
        want, got = _run(model, feed), _run(smoothed, feed)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    before = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in smoothed.graph.initializer}
    ratio = after["Wq"][:, 0] / before["Wq"][:, 0]
    assert ratio[LN_OUTLIER] > 1.5 * np.median(ratio)  # the wide channel's row carries more of it


def test_a_mul_is_added_for_shared_or_wide_activations_and_folded_into_a_vector_factor():
    smoothed, _ = _smoothed(block_model())
    nodes = {n.name: n for n in smoothed.graph.node}
    added = [n for n in smoothed.graph.node if n.name.endswith(f"{TAG}_mul")]
    assert [n.input[0] for n in added] == ["h"]  # h: read by two MatMuls (and the residual, left whole)
    assert nodes["q/MatMul"].input[0] == nodes["v/MatMul"].input[0] == added[0].output[0]
    assert list(nodes["residual"].input) == ["h", "q"]
    assert nodes["scale"].input[1] != "c" and nodes["out/MatMul"].input[0] == "u" + RESCALED  # 1/s went into c: free
