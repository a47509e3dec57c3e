"""Cutting real models at new inputs (issue 39): a mid Conv of the PP-OCR detector to a later
tensor, and one MiniLM encoder layer (its input hidden states to its output). The cut model equals
`onnx.utils.extract_model` on the same names, fed with the tensors the original model computes;
it passes onnx.checker's full check and loads in ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.cli import main

from .corpus import ocr_detector
from .minilm_layers import minilm_inference_model

SENTENCES = ["A man is playing a guitar.", "The new movie is awesome, I loved it", "hello"]


def _run(path: Path, feeds: dict[str, np.ndarray], names: list[str] | None = None) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in sess.get_inputs()}
    return sess.run(names, {k: v for k, v in feeds.items() if k in wanted})


def _with_outputs(model_path: Path, names: list[str], folder: Path) -> Path:
    """The source with `names` as extra outputs: what the original model computes there."""
    model = onnx.load(str(model_path))
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    probe = folder / "probe.onnx"
    onnx.save(model, str(probe))
    return probe


def _cut_equals_extract(tmp_path: Path, source: Path, starts: list[str], output: str, feeds: dict, capsys) -> dict:
    cut = tmp_path / "cut.onnx"
    code = main(["export", str(source), "--from", ",".join(starts), "--outputs", output, "-o", str(cut)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    written = onnx.load(str(cut))
    onnx.checker.check_model(written, full_check=True)
    inputs = [i.name for i in written.graph.input]
    assert inputs[:len(starts)] == starts  # the new inputs first, then the source's still needed
    extracted = tmp_path / "extracted.onnx"
    onnx.utils.extract_model(str(source), str(extracted), inputs, [output])
    values = dict(zip(starts, _run(_with_outputs(source, starts, tmp_path), feeds, starts), strict=True))
    fed = {**feeds, **values}
    (got,) = _run(cut, fed)
    (want,) = _run(extracted, fed)
    (original,) = _run(source, feeds, [output]) if output in {o.name for o in onnx.load(
        str(source), load_external_data=False).graph.output} else _run(_with_outputs(source, [output], tmp_path),
                                                                      feeds, [output])
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5
    assert np.abs(got - original).max() <= 1e-4  # and what the whole model computes there
    return {"inputs": inputs, "stderr": captured.err}


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return minilm_inference_model(tmp_path_factory.mktemp("minilm"), SENTENCES, layers=2)


def test_one_minilm_encoder_layer(tmp_path, capsys, minilm):
    source, feeds = minilm
    start = "/encoder/layer.0/output/LayerNorm/Add_1_output_0"  # layer 1's input hidden states
    found = _cut_equals_extract(tmp_path, source, [start], "last_hidden_state", feeds, capsys)
    kept = found["inputs"][1:]  # the source's inputs the layer still reads (the mask, shapes of the ids)
    assert "attention_mask" in kept and set(kept) <= {"input_ids", "token_type_ids", "attention_mask"}
    assert f"the source's inputs {', '.join(kept)} are still needed" in found["stderr"]


def test_a_mid_conv_of_the_detector_to_a_later_tensor(tmp_path, capsys):
    source = ocr_detector()
    model = onnx.load(str(source), load_external_data=False)
    convs = [n.output[0] for n in model.graph.node if n.op_type == "Conv"]
    start, end = convs[10], convs[24]
    image = np.random.default_rng(0).random((1, 3, 96, 128), np.float32)
    found = _cut_equals_extract(tmp_path, source, [start], end, {"x": image}, capsys)
    assert found["inputs"] == [start]


def test_a_start_inference_cannot_type_is_typed_by_one_run(tmp_path, capsys):
    """silero_vad's If output has no rank for shape inference (its branches disagree): the cut's
    new input takes its element type and rank from one run, as a rank-less output does."""
    from .corpus import silero_vad

    out = tmp_path / "cut.onnx"
    assert main(["export", str(silero_vad()), "--from", "If_0_outputs_0", "--outputs", "output", "-o", str(out)]) == 0
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    (start,) = written.graph.input
    assert start.name == "If_0_outputs_0" and start.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert start.type.tensor_type.HasField("shape") and len(start.type.tensor_type.shape.dim) == 2
    value = np.random.default_rng(0).random((1, 1), np.float32)
    (got,) = _run(out, {"If_0_outputs_0": value})
    np.testing.assert_array_equal(got, value)
