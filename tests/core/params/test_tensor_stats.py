"""A weight's statistics equal numpy's on the same tensor, read in chunks from a file span or from
memory alike (core/params/tensor_stats.py), and `onnxport inspect MODEL --tensor NAME` prints them."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxport.core.cli import main
from onnxport.core.io.parameter_set import FileSpan
from onnxport.core.params.tensor_stats import TensorValues, tensor_page, tensor_stats
from onnxport.core.util.errors import OnnxportError


def _values(a: np.ndarray, elem_type: int, tmp_path, stored: np.ndarray | None = None) -> list[TensorValues]:
    """The same tensor as a file span and as an in-memory array."""
    raw = (a if stored is None else stored).astype((a if stored is None else stored).dtype.newbyteorder("<"))
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 8 + raw.tobytes())
    return [TensorValues("w", elem_type, a.shape, span=FileSpan(path, 8, raw.nbytes)),
            TensorValues("w", elem_type, a.shape, array=lambda: raw)]


def _expect(a: np.ndarray, bins: int = 64) -> dict:
    x = a.astype(np.float64).reshape(-1)
    finite = x[np.isfinite(x)]
    counts, edges = np.histogram(finite, bins=bins, range=(finite.min(), finite.max()))
    return {"min": finite.min(), "max": finite.max(), "mean": finite.mean(), "std": finite.std(),
            "zeros": int((x == 0).sum()), "nan": int(np.isnan(x).sum()), "posinf": int((x == np.inf).sum()),
            "neginf": int((x == -np.inf).sum()), "histogram": counts.tolist(), "edges": edges.tolist()}


@pytest.mark.parametrize("chunk_bytes", [64, 4096, 1 << 24])
def test_float32_statistics_equal_numpys_whatever_the_chunks(tmp_path, chunk_bytes):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 53)).astype(np.float32) * 3 + 1
    a[0, :5] = 0
    a[1, 1], a[2, 2], a[3, 3] = np.nan, np.inf, -np.inf
    want = _expect(a)
    for values in _values(a, onnx.TensorProto.FLOAT, tmp_path):
        got = tensor_stats(values, chunk_bytes=chunk_bytes)
        assert got.count == a.size and got.shape == [37, 53] and got.dtype == "float32"
        for key in ("zeros", "nan", "posinf", "neginf", "histogram", "edges", "min", "max"):
            assert getattr(got, key) == want[key], key
        assert got.mean == pytest.approx(want["mean"], rel=1e-12) and got.std == pytest.approx(want["std"], rel=1e-12)


@pytest.mark.parametrize(("dtype", "elem_type"), [(np.float16, onnx.TensorProto.FLOAT16),
                                                  (np.int8, onnx.TensorProto.INT8),
                                                  (np.int64, onnx.TensorProto.INT64)])
def test_other_types(tmp_path, dtype, elem_type):
    a = (np.random.default_rng(1).standard_normal(1000) * 50).astype(dtype)
    want = _expect(a, bins=16)
    for values in _values(a, elem_type, tmp_path):
        got = tensor_stats(values, bins=16, chunk_bytes=100)
        assert (got.min, got.max, got.histogram, got.zeros) == (want["min"], want["max"], want["histogram"],
                                                                want["zeros"])
        assert got.mean == pytest.approx(want["mean"]) and got.std == pytest.approx(want["std"])
        assert tensor_page(values, 990, 64).tolist() == a[990:].tolist()  # the last page is short


def test_bfloat16_is_widened(tmp_path):
    a = np.array([1.5, -2.0, 0.0, 3.25], np.float32)
    stored = (a.view(np.uint32) >> 16).astype(np.uint16)  # exact in bfloat16
    for values in _values(a, onnx.TensorProto.BFLOAT16, tmp_path, stored):
        got = tensor_stats(values, bins=4)
        assert (got.min, got.max, got.zeros) == (-2.0, 3.25, 1)
        assert tensor_page(values).tolist() == a.tolist()


def test_strings_are_refused_in_one_line():
    values = TensorValues("names", onnx.TensorProto.STRING, (2,), array=lambda: np.array([b"a", b"b"], object))
    with pytest.raises(OnnxportError, match="'names' is string: no statistics"):
        tensor_stats(values)


def test_a_truncated_span_is_refused(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * 12)
    with pytest.raises(OnnxportError, match="fewer than"):
        tensor_stats(TensorValues("w", onnx.TensorProto.FLOAT, (4,), span=FileSpan(path, 0, 12)))


def test_inspect_tensor_prints_the_statistics(tmp_path, capsys):
    w = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    graph = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
                                   [numpy_helper.from_array(w, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(onnx.helper.make_model(graph), path)
    assert main(["inspect", str(path), "--tensor", "w", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["tensor"]
    assert (got["min"], got["max"], got["zeros"], got["count"]) == (-6.0, 5.0, 1, 12)
    assert got["values"] == w.reshape(-1).tolist()
    assert main(["inspect", str(path), "--tensor", "w"]) == 0
    text = capsys.readouterr().out
    assert "w: float32 [3x4], 12 values" in text and "min -6  max 5" in text and "histogram (64 bins" in text
    assert main(["inspect", str(path), "--tensor", "v"]) == 2
    err = capsys.readouterr().err
    assert "no weight named 'v'" in err and err.count("\n") == 1
