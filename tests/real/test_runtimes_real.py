"""The real PP-OCR detector and all-MiniLM-L6-v2 (its first two layers, real weights) on OpenVINO's
execution provider (.venv-openvino) against this environment's CPU, through `validate` and `bench`
with `--providers`: OpenVINO runs nodes (> 0), every output has cosine >= 0.999 against CPU, and
each report carries OpenVINO's p50 beside CPU's with the paired ratio."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onnxport.core.cli import main

from ..core.runtimes.runtime_models import OPENVINO, openvino_python
from .corpus import ocr_detector
from .minilm_layers import minilm_inference_model
from .test_minilm_quantize import SENTENCES
from .text_images import rapidocr_page


@pytest.fixture(scope="module")
def models(tmp_path_factory, qapp):
    """{name: (model, inputs .npz)}: the detector on a rendered page, MiniLM on real sentences."""
    openvino_python()
    pytest.importorskip("torch")
    work = tmp_path_factory.mktemp("runtimes")
    np.savez(work / "page.npz", x=rapidocr_page(320))
    minilm, feed = minilm_inference_model(work, SENTENCES)
    np.savez(work / "sentences.npz", **feed)
    return {"detector": (ocr_detector(), work / "page.npz"), "minilm": (minilm, work / "sentences.npz")}


def _run(argv: list[str], capsys) -> tuple[int, dict]:
    code = main(argv + ["--providers", "cpu,openvino", "--seconds", "0.2", "--json", "-q"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("command", ["validate", "bench"])
@pytest.mark.parametrize("name", ["detector", "minilm"])
def test_openvino_runs_the_real_model_as_accurately_as_cpu(models, name, command, capsys):
    model, inputs = models[name]
    code, report = _run([command, str(model), "--inputs", str(inputs)], capsys)
    assert code == 0 and report["passed"] is True
    cpu, ov = report["providers"]
    assert cpu["provider"] == "CPUExecutionProvider" and ov["provider"] == OPENVINO and ov["error"] is None
    assert ov["nodes_on_provider"] > 0 and ov["nodes_on_provider"] + ov["nodes_on_cpu"] == ov["nodes_partitioned"]
    assert ov["ran"].get(OPENVINO, 0) >= 1 and ov["nodes_in_file"] > 0
    assert ov["outputs"] and all(o["cosine"] >= 0.999 for o in ov["outputs"])
    assert cpu["p50_ms"] > 0 and ov["p50_ms"] > 0 and ov["load_s"] > 0
    paired = ov["against_cpu"]
    assert paired["blocks"] >= 6 and paired["low"] <= paired["median"] <= paired["high"]
