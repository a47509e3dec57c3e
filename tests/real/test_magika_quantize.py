"""Static QDQ of the real magika model through the CLI (issue 26 item 7): with ONNX Runtime 1.32 it
ended in a traceback (exit 1) inside ORT's `_adjust_weight_scale_for_int32_bias`, which read the
[1, 214] bias of the Dense layer that pre-processing fuses into a Gemm (core/quantize/gemm_bias.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from onnxport.core.cli import main

from .corpus import magika

PAD, HALF = 256, 1024


def _features(data: bytes) -> np.ndarray:
    """magika's input for one file: its first and last 1024 bytes, padded with 256."""
    head = list(data[:HALF]) + [PAD] * max(0, HALF - len(data))
    tail = [PAD] * max(0, HALF - len(data)) + list(data[-HALF:])
    return np.array(head + tail, np.int32)


def _batch(files: list[Path]) -> np.ndarray:
    return np.stack([_features(f.read_bytes()) for f in files])


def test_static_quantization_of_magika(tmp_path, capsys):
    root = Path(__file__).resolve().parents[2]
    files = sorted(p for p in (root / "core").rglob("*.py") if p.stat().st_size > 0)[:24]
    np.savez(tmp_path / "calibration.npz", bytes=_batch(files[:16]))
    np.savez(tmp_path / "held_out.npz", bytes=_batch(files[16:]))
    out = tmp_path / "magika.qdq.onnx"
    code = main(["quantize", str(magika()), "-o", str(out), "--mode", "static", "--calibration",
                 str(tmp_path / "calibration.npz"), "--validation-inputs", str(tmp_path / "held_out.npz"),
                 "--int8-path", "avx2",  # 7-bit weights: the same verdict on every x86 CPU
                 "--op-types", "Conv,Gemm,MatMul", "--no-target", "-q"])  # the weighted layers, no search (7 s, not 46)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    written = onnx.load(out)
    onnx.checker.check_model(written)
    assert "QuantizeLinear" in {n.op_type for n in written.graph.node}
    held_out = {"bytes": _batch(files[16:])}
    run = lambda path: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, held_out)[0]  # noqa: E731
    want, got = run(magika()), run(out)
    assert (want.argmax(1) == got.argmax(1)).mean() >= 0.99
