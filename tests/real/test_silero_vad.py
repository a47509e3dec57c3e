"""silero-vad (a recurrent voice-activity model whose work sits in nested `If` bodies, weights held
in Constant nodes inside them): export (folded), preview and inspect keep what the bodies read."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.cli import main
from onnxport.core.export.export import export_model
from onnxport.core.graph.preview import preview_bytes

from .corpus import silero_vad


def _feeds() -> list[dict[str, np.ndarray]]:
    """Both branches of the top-level If: 16 kHz windows of 512 samples, 8 kHz windows of 256."""
    rng = np.random.default_rng(0)
    feeds = []
    for sr, samples in ((16000, 512), (8000, 256)):
        for state in (np.zeros((2, 1, 128), np.float32), rng.standard_normal((2, 1, 128)).astype(np.float32) * 0.1):
            feeds.append({"input": rng.standard_normal((1, samples)).astype(np.float32) * 0.1,
                          "state": state, "sr": np.array(sr, np.int64)})
    return feeds


def _run(path, feed, outputs=None):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(outputs, feed)


@pytest.mark.parametrize("outputs", [["output", "stateN"], ["stateN"]], ids=["own-outputs", "stateN"])
def test_export_runs_and_matches_the_original_exactly(tmp_path, outputs):
    src = silero_vad()
    result = export_model(src, tmp_path / "vad.onnx", outputs)  # folding on
    written = onnx.load(str(result.path))
    assert [o.name for o in written.graph.output] == outputs
    assert "If" in [n.op_type for n in written.graph.node]
    for feed in _feeds():
        for got, want in zip(_run(result.path, feed), _run(src, feed, outputs), strict=True):
            np.testing.assert_array_equal(got, want)


def test_preview_keeps_the_if_and_carries_no_weights():
    data = preview_bytes(silero_vad(), ["stateN"])
    preview = onnx.load_from_string(data)
    assert "If" in [n.op_type for n in preview.graph.node] and [o.name for o in preview.graph.output] == ["stateN"]
    assert len(data) < silero_vad().stat().st_size / 5  # the Constant-held weights inside the bodies are stripped


def test_inspect_json_lists_tensors_inside_the_branches(capsys):
    assert main(["inspect", str(silero_vad()), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    subs = {s["path"]: s for s in model["subgraphs"]}
    assert {"If_0/then_branch", "If_0/else_branch"} <= set(subs)
    inner = {t["name"]: t for t in subs["If_0/else_branch"]["tensors"]}
    conv = [t for t in inner.values() if t["op"] == "Conv"]
    assert conv and all(t["subgraph"] == "If_0/else_branch" for t in conv)
    weights = [t for t in inner.values() if t["op"] == "Constant" and (t["bytes"] or 0) > 100_000]
    assert weights  # the weights live in Constant nodes inside the branch
    assert subs["If_0/else_branch"]["captures"] == ["input", "state"]
    assert any(s["depth"] >= 3 for s in model["subgraphs"])  # Ifs nested inside the branches
    assert model["suggested_outputs"] == []  # nothing the If reads is a free output
