"""silero-vad (a recurrent voice-activity model whose work sits in nested `If` bodies, weights held
in Constant nodes inside them): export (folded), preview and inspect keep what the bodies read;
quantize reaches into the bodies (dynamic: the LSTMs; fp16: everything), judged on streamed
speech-like audio (speech_audio.py) the way silero's own wrapper feeds it; static QDQ says in one
line that it cannot."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.cli import main
from onnxport.core.export.export import export_model
from onnxport.core.quantize.gain import all_graphs
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.workflow.sources import open_session

from .corpus import silero_vad
from .speech_audio import SR, speech

WINDOW, CONTEXT = 512, 64  # silero's wrapper feeds each 512-sample window after the previous 64 samples


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
    data = open_session(silero_vad()).selection(["stateN"]).preview.SerializeToString()
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


def _stream(path, audio: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[dict[str, np.ndarray]]]:
    """Speech probability per window, the final state, and the feeds (state carried window to window)."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    padded = np.concatenate([np.zeros(CONTEXT, np.float32), audio])
    probs, feeds = [], []
    for i in range(CONTEXT, padded.size - WINDOW + 1, WINDOW):
        feed = {"input": padded[None, i - CONTEXT:i + WINDOW], "state": state, "sr": np.array(SR, np.int64)}
        prob, state = sess.run(None, feed)
        probs.append(prob.item())
        feeds.append(feed)
    return np.array(probs), state, feeds


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def reference():
    probs, state, feeds = _stream(silero_vad(), speech(seconds=2.0))
    assert (probs[18:48] > 0.5).all() and np.median(probs[18:48]) > 0.95 and (probs[:12] < 0.1).all()  # speech where it is
    return probs, state, feeds


def _body_ops(path) -> list[str]:
    return [n.op_type for g in list(all_graphs(onnx.load(str(path))))[1:] for n in g.node]


@pytest.mark.parametrize("mode", ["dynamic", "fp16"])
def test_quantize_reaches_into_the_branches_and_keeps_the_speech_probabilities(tmp_path, reference, mode):
    want_probs, want_state, feeds = reference
    out = tmp_path / f"vad.{mode}.onnx"
    result = quantize(silero_vad(), out, mode,
                      QuantizeOptions(int8_path="avx2", validation_inputs=feeds[::3]))
    assert result.target_met and result.kept_float_nodes == []
    blamed = result.validation.tensors.nodes  # compared inside the branch taken, never the If around it
    assert blamed and all(e.op_type != "If" and "then_branch" in e.node for e in blamed if e.added > 0)
    assert result.validation.outputs[0].samples is None  # `output` [batch, 1]: no one-value cosines
    onnx.checker.check_model(str(out))
    ops = _body_ops(out)
    if mode == "dynamic":  # the four LSTMs (two per sample rate) int8; Conv stays float (no ConvInteger)
        assert ops.count("DynamicQuantizeLSTM") == 4 and "LSTM" not in ops
        assert result.size_bytes < 0.8 * result.source_size_bytes  # measured 0.76
        min_cosine, max_diff, min_state_cosine = 0.9999, 0.05, 0.998  # measured 0.99999, 0.023, 0.9993
    else:
        assert result.size_bytes < 0.6 * result.source_size_bytes  # measured 0.54
        min_cosine, max_diff, min_state_cosine = 0.999999, 0.005, 0.99999  # measured 0.9999999, 0.0013, 0.9999985
    probs, state, _ = _stream(out, speech(seconds=2.0))
    assert _cosine(probs, want_probs) >= min_cosine and np.abs(probs - want_probs).max() <= max_diff
    clear = np.abs(want_probs - 0.5) > 0.1  # the same windows read as speech (away from the boundary)
    assert ((probs > 0.5) == (want_probs > 0.5))[clear].all() and clear.sum() >= 55
    assert _cosine(state, want_state) >= min_state_cosine
    assert main(["validate", str(out), "--reference", str(silero_vad()), "-q"]) == 0  # judged as lossy, not exact


def test_static_says_in_one_line_it_cannot_quantize_inside_the_branches(tmp_path, capsys):
    out = tmp_path / "vad.static.onnx"
    assert main(["quantize", str(silero_vad()), "--mode", "static", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "static QDQ quantization cannot quantize inside If/Loop/Scan bodies" in err and "12 Conv, 4 LSTM" in err
    assert "--mode dynamic" in err and "fp16" in err
    assert not list(tmp_path.iterdir())


def test_int4_says_truly_why_it_finds_nothing(tmp_path, capsys):
    assert main(["quantize", str(silero_vad()), "--mode", "int4", "-o", str(tmp_path / "vad.int4.onnx")]) == 2
    err = capsys.readouterr().err.strip()
    assert "found nothing to quantize (it has 12 Conv, 4 LSTM inside If/Loop/Scan bodies)" in err
    assert "int4 quantizes only large MatMul weights" in err and not list(tmp_path.iterdir())
