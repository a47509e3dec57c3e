"""Tensor statistics piece by piece; non-finite values never read as equal; batches stay in budget."""

from __future__ import annotations

import math

import numpy as np

from onnxport.core.compare import numeric, stats
from onnxport.core.compare.stats import Accumulator, Tolerance, diff_stats


def test_pieces_give_the_figures_of_the_whole(monkeypatch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(10_001).astype(np.float32)
    b = a + rng.standard_normal(10_001).astype(np.float32) * 1e-3
    whole = diff_stats(a, b)
    monkeypatch.setattr(stats, "PIECE", 97)
    pieces = diff_stats(a, b)
    assert math.isclose(whole.max_abs, float(np.abs(a.astype(np.float64) - b).max()))
    for field in ("max_abs", "cosine", "rel_l2", "ref_max_abs"):
        assert math.isclose(getattr(whole, field), getattr(pieces, field), rel_tol=1e-9)
    assert not whole.identical and Tolerance().departs(whole) and not Tolerance(atol=1e-2).departs(whole)


def test_nan_never_reads_as_equal():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    s = diff_stats(a, b)
    assert s.nonfinite == 1 and s.max_abs == 0.0 and Tolerance(atol=1.0).departs(s)
    both = diff_stats(np.array([np.nan, 1.0], np.float32), np.array([np.inf, 1.0], np.float32))
    assert both.nonfinite == 1 and Tolerance(atol=1.0).departs(both)


def test_the_same_bytes_are_equal_even_when_not_finite():
    a = np.array([np.nan, np.inf, 1.0], np.float32)
    s = diff_stats(a, a.copy())
    assert s.identical and s.nonfinite == 0 and not Tolerance(atol=0, rtol=0).departs(s)


def test_a_shape_difference_departs():
    acc = Accumulator()
    acc.add(np.zeros(6), np.zeros(6), (2, 3), (3, 2))
    s = acc.stats()
    assert s.shape_differs and Tolerance(atol=1.0).departs(s)


def test_tensor_batches_stay_within_the_budget():
    pairs = [(f"a{i}", f"b{i}") for i in range(20)]
    sizes = {f"a{i}": (i % 5 + 1) * 100 for i in range(20)}
    start, batches = 0, []
    while start < len(pairs):
        batch = numeric._next_batch(pairs, start, sizes, [], budget=700)
        batches.append(batch)
        start += len(batch)
    assert [p for b in batches for p in b] == pairs
    assert all(sum(sizes[p[0]] for p in b) <= 700 for b in batches)
    one_big = numeric._next_batch([("x", "y"), ("z", "w")], 0, {"x": 10_000, "z": 1}, [], budget=700)
    assert one_big == [("x", "y")]  # a tensor bigger than the budget goes alone
    assert numeric._next_batch(pairs, 0, sizes, [], budget=None) == pairs  # unbounded: everything at once


def test_a_tensor_no_run_can_expose_is_left_out_and_the_rest_compared(tmp_path):
    """ORT refuses to expose some tensors (a sequence's, an optional's): its batch is split until
    that tensor stands alone, which is skipped with the reason; every other tensor is compared."""
    import onnx

    from onnxport.core.compare.numeric import NumericDiff, _run_batch
    from onnxport.core.compare.runs import Runner
    from onnxport.core.compare.sides import open_side
    from onnxport.core.util.errors import OnnxportError

    from ..model_builders import forward_mlp

    path = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), str(path))
    side = open_side(path)

    class Refusing(Runner):
        def run(self, names, feed):
            if "fc1.out" in names:
                raise OnnxportError("cannot expose fc1.out")
            return super().run(names, feed)

    names = ["fc1.mm", "fc1.out", "hidden", "logits"]
    ra, rb = Refusing(side, names), Runner(side, names)
    feed = {"input": np.ones((2, 8), np.float32)}
    result = NumericDiff("test", Tolerance())
    got = list(_run_batch(ra, rb, [(n, n) for n in names], feed, feed, result))
    assert [p[0] for p, _, _ in got] == ["fc1.mm", "hidden", "logits"]
    assert result.skipped == [{"name": "fc1.out", "reason": "cannot expose fc1.out"}]
    assert all(np.array_equal(va, vb) for _, va, vb in got)
    ra.close()
    rb.close()
