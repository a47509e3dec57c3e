"""CUDA and TensorRT through .venv-gpu (`make runtime-gpu`), where an NVIDIA GPU is present; skipped
with the reason elsewhere (no GPU here, or no ONNX Runtime build with the provider). Same contract
as OpenVINO's: nodes taken, cosine against CPU, p50 beside CPU's; TensorRT's fp16 said."""

from __future__ import annotations

import os
import shutil

import pytest

from onnxport.core.runtimes.discovery import find_runtimes
from onnxport.core.runtimes.run_on import run_on_providers

from .runtime_models import mixed_model

CUDA, TENSORRT = "CUDAExecutionProvider", "TensorrtExecutionProvider"


def _gpu_runtimes(provider: str) -> list:
    if not (os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi")):
        pytest.skip("no NVIDIA GPU on this machine (CUDA and TensorRT need one)")
    runtimes = find_runtimes()
    if not any(provider in r.providers for r in runtimes):
        pytest.skip(f"no ONNX Runtime with {provider} found (make runtime-gpu)")
    return runtimes


def test_cuda_runs_the_model_as_accurately_as_cpu(tmp_path):
    runtimes = _gpu_runtimes(CUDA)
    report = run_on_providers(mixed_model(tmp_path / "m.onnx"), [CUDA], runtimes=runtimes, seconds=0.2)
    cuda = report.results[1]
    assert cuda.error is None, cuda.error
    assert cuda.nodes_on_provider > 0 and cuda.ran.get(CUDA, 0) > 0
    assert cuda.outputs[0].cosine >= 0.999 and cuda.p50_ms > 0 and cuda.ratio is not None


def test_tensorrt_in_fp16_says_so_and_shows_its_accuracy(tmp_path):
    runtimes = _gpu_runtimes(TENSORRT)
    options = {TENSORRT: {"trt_fp16_enable": "1"}}
    report = run_on_providers(mixed_model(tmp_path / "m.onnx"), [TENSORRT], runtimes=runtimes, options=options,
                              seconds=0.2)
    trt = report.results[1]
    if trt.error and "did not start" in trt.error:
        pytest.skip(f"TensorRT's libraries are not installed: {trt.error}")
    assert trt.error is None, trt.error
    assert trt.reduced_precision is True and "fp16" in trt.precision
    assert trt.nodes_on_provider > 0 and trt.outputs[0].cosine >= 0.99
