"""int4 of a model over the bounded size: weights streamed, the verdict run in pieces (bounded.py).

The size limit is lowered for these small models (the path, not the size, is under test)."""

from __future__ import annotations

import pytest

from onnxport.core.quantize import bounded
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize
from onnxport.core.util.errors import OnnxportError
from tests.core.quantize.test_prep_external import save_external


def _quantize(src, dst, target=None):
    return quantize(src, dst, "int4", QuantizeOptions(accuracy_target=target, preprocess=False))


def test_bounded_path_writes_the_bytes_of_the_in_memory_one(tmp_path, monkeypatch):
    save_external(tmp_path / "big.onnx", layers=3, k=256)
    whole = _quantize(tmp_path / "big.onnx", tmp_path / "whole.onnx")
    assert not any("piece at a time" in n for n in whole.notes)
    monkeypatch.setattr(bounded, "BOUNDED_BYTES", 0)
    monkeypatch.setattr("onnxport.core.evaluate.segments.PIECE_BYTES", 256 * 256 * 4)
    streamed = _quantize(tmp_path / "big.onnx", tmp_path / "streamed.onnx")
    assert any("piece at a time" in n for n in streamed.notes)
    assert (tmp_path / "streamed.onnx").read_bytes() == (tmp_path / "whole.onnx").read_bytes()
    assert streamed.validation.outputs[0].cosine == pytest.approx(whole.validation.outputs[0].cosine, abs=0.02)
    assert streamed.validation.batches == bounded.VERDICT_BATCHES


def test_bounded_path_refuses_a_missed_target_and_writes_nothing(tmp_path, monkeypatch):
    save_external(tmp_path / "big.onnx", layers=3, k=256)
    monkeypatch.setattr(bounded, "BOUNDED_BYTES", 0)
    with pytest.raises(OnnxportError, match="misses the accuracy target"):
        _quantize(tmp_path / "big.onnx", tmp_path / "out.onnx", target=0.999999)
    assert not (tmp_path / "out.onnx").exists()
