"""A real quantization report for GUI tests: a 256-wide MLP exported, dynamically quantized (int8
pinned to the AVX2 path: the same figures on any CPU) and reported, optionally with a benchmark."""

from __future__ import annotations

from pathlib import Path

import onnx

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.report import build_report
from onnxport.core.export.export import export_model
from onnxport.core.quantize.quantize import QuantizeOptions, quantize

from ..core.model_builders import forward_mlp, mlp_weights


def quantized_mlp_report(folder: Path, bench: bool = False) -> tuple[Path, dict]:
    """(the float32 model, the report of its dynamic int8 quantization)."""
    forward = folder / "forward.onnx"
    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), forward)
    fp32 = folder / "fp32.onnx"
    export_model(forward, fp32, ["logits"])
    result = quantize(fp32, folder / "int8.onnx", "dynamic",
                      QuantizeOptions(int8_path="avx2", accuracy_target=None))
    timing = benchmark([fp32, result.path], seconds=0.05, min_runs=3, warmup=0) if bench else None
    return fp32, build_report(export={"path": str(fp32)}, quantize=result, bench=timing)
