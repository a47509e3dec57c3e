"""A per-sample spread only where a sample holds more than one value: the cosine of a one-value row
is 1 (or -1) whatever its error, so silero VAD's [batch, 1] speech probability printed 'per sample:
min 1.0000, p5 1.0000' beside an overall cosine of 0.9935 (issue 35)."""

from __future__ import annotations

import numpy as np

from onnxport.core.evaluate.compare import LOSSY, OutputStats


def _result(got: np.ndarray, want: np.ndarray):
    stats = OutputStats("y")
    stats.update(got.astype(np.float32), want.astype(np.float32))
    return stats.result(LOSSY)


def test_one_value_per_sample_has_no_spread():
    rng = np.random.default_rng(0)
    want = rng.random((32, 1))
    r = _result(want + rng.normal(0, 0.1, want.shape), want)
    assert r.cosine < 0.999  # an error the overall figure shows
    assert r.samples is None and r.spread_line() == ""


def test_several_values_per_sample_have_a_spread():
    rng = np.random.default_rng(0)
    want = rng.random((32, 4))
    r = _result(want + rng.normal(0, 0.1, want.shape), want)
    assert r.samples["count"] == 32 and r.samples["min"] < 0.999 and "per sample (32)" in r.spread_line()
