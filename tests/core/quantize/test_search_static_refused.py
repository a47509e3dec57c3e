"""The static search after a unit met the target alone in the switched runs but not quantized for
real (PP-OCRv4 det: 0.993 switched, 0.991 for real, 0.988 on held-out pages): that set is never
chosen again and the units holding it are measured first (real ORT, the tiny outlier CNN)."""

from __future__ import annotations

import numpy as np
import onnx

from onnxport.core.evaluate.compare import lossy
from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.export.staging import Staging
from onnxport.core.quantize import modes
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.search_static import _Search
from onnxport.core.util.progress import Reporter

from .test_search_static import _calibration, outlier_cnn, switched_runs


def test_a_refused_float_set_gives_way_to_the_units_holding_it(tmp_path, monkeypatch):
    model = outlier_cnn()
    src, quantized = tmp_path / "cnn.onnx", tmp_path / "cnn.qdq.onnx"
    onnx.save_model(model, str(src))
    feeds = open_feeds(_calibration(), input_specs(model), batch_size=2)
    ranges = calibrate(src, feeds, ["Conv"], tmp_path, Reporter(None, None))
    modes.static(src, quantized, tensors_range=ranges, op_types=["Conv"], per_channel=True, reduce_range=True,
                 exclude=[], big=False)
    ran = switched_runs(monkeypatch)
    with Staging(tmp_path / "out.onnx") as stage:
        search = _Search(quantized, src, feeds, [], lossy(0.99), {"Conv"}, Reporter(None, None), stage, None)
        refused = {frozenset({"conv1"})}
        _, kept, info = search.choose(refused)
    assert frozenset(kept) not in refused and {"conv1"} < set(kept)
    assert ran[:2] == [frozenset(), frozenset({"conv1", "conv2"})]  # the unit holding it, before any other
    assert frozenset({"conv1"}) not in ran and info["alone"]
    assert np.isfinite(info["base_min_cosine"])
