"""The accuracy verdict is measured on held-out inputs the search never saw, with at least 32
samples by default (bundled sentences for a text model with a tokenizer), and the CLI's exit codes
and progress say what happened (issue 30)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.evaluate.benchmark import FP16_SLOWER, BenchReport, ModelBench, fp16_note
from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.evaluate.timing import RatioEstimate
from onnxport.core.quantize import held_out
from onnxport.core.quantize.calibration import calibrate
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.progress import Reporter

from ..quant_models import encoder, save
from .test_calibration_sources import _tokenizer

PIN = "avx2"  # 7-bit weights: exact on every CPU's int8 kernels (no verdict here depends on VNNI)


def _two_matmuls(path: Path, d: int = 256, h: int = 512) -> Path:
    """x[N, d] -> MatMul -> Relu -> MatMul -> y[N, d]: weights big enough that int8 is a gain."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((h, d)) / np.sqrt(h)).astype(np.float32)
    w1[0] = 0.0  # input channel 0 adds nothing: huge there, it only widens the int8 activation scale
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"), helper.make_node("Relu", ["a"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")],
        "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", d])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return Path(save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path))


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return input_specs(onnx.load(str(_two_matmuls(tmp_path_factory.mktemp("spec") / "m.onnx"))))


def test_split_holds_out_at_least_32_samples_the_search_never_sees(spec):
    x = np.repeat(np.arange(80, dtype=np.float32)[:, None], 256, axis=1)  # sample i holds the value i
    feeds = open_feeds({"x": x}, spec, batch_size=8)
    parts = held_out.split(feeds)
    seen = {int(v) for f in parts.search for v in f["x"][:, 0]}
    held = {int(v) for f in parts.held_out for v in f["x"][:, 0]}
    calibrated = {int(v) for f in parts.seen for v in f["x"][:, 0]}
    assert len(held) >= held_out.HELD_OUT_SAMPLES and not held & seen and not held & calibrated
    assert seen and seen <= calibrated


def test_one_batch_is_cut_in_two_and_one_sample_is_said(spec):
    parts = held_out.split(open_feeds({"x": np.arange(6 * 256, dtype=np.float32).reshape(6, 256)}, spec))
    assert [f["x"].shape[0] for f in parts.search] == [3] and [f["x"].shape[0] for f in parts.held_out] == [3]
    assert parts.apart and "only 3 sample(s) held out" in parts.notes[0]
    one = held_out.split(open_feeds({"x": np.ones((1, 256), np.float32)}, spec))
    assert not one.apart and "one validation sample" in one.notes[0]


def test_generated_validation_holds_out_at_least_32_samples(tmp_path):
    result = quantize(_two_matmuls(tmp_path / "m.onnx"), tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN))
    v = result.validation
    assert "held out" in v.inputs
    assert v.outputs[0].samples["count"] >= held_out.HELD_OUT_SAMPLES
    assert v.outputs[0].samples["min"] <= v.outputs[0].samples["mean"] <= 1.0
    assert "per sample" in "\n".join(result.summary_lines())
    verdict = result.to_dict()["held_out"]
    assert verdict["inputs"] == v.inputs and verdict["per_sample"]["count"] >= 32 and verdict["passed"] is True


def test_the_verdict_is_measured_on_inputs_the_search_did_not_see(tmp_path):
    """The search part is plain; in the held-out part an unused channel is 300x the others and
    widens the int8 activation scale: the search meets the target, the held-out verdict does not,
    so the node reading that channel goes back to float, and the report says the held-out part chose it."""
    model = _two_matmuls(tmp_path / "m.onnx")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    x[32:, 0] = 300.0  # the last 32 samples: the held-out part
    np.savez(tmp_path / "val.npz", x=x)
    result = quantize(model, tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, validation_inputs=tmp_path / "val.npz"))
    first = result.attempts[0]
    assert first["inputs"] == "held out" and not first["passed"] and first["kept_float_nodes"] == []
    assert "held out" in result.validation.inputs and result.validation.passed
    assert result.kept_float_nodes == ["mm1"]  # the MatMul reading the wide channel, not the other
    assert any("held-out inputs missed the target where the searched ones met it" in n for n in result.notes)


def _text_model(folder: Path) -> Path:
    """A small encoder (ids 0..8) in a folder with its Hugging Face tokenizer beside it."""
    folder.mkdir()
    model = Path(save(encoder(vocab=9, d=64, ff=256), folder / "model.onnx"))
    tok = _tokenizer(folder / "tok")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tok / name, folder / name)
    return model


def test_a_text_model_with_its_tokenizer_is_validated_on_bundled_sentences(tmp_path):
    model = _text_model(tmp_path / "hf")
    result = quantize(model, tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, accuracy_target=0.9))
    assert any("bundled English sentences" in n for n in result.notes), result.notes
    assert "sentences.txt" in result.validation.inputs and "held out" in result.validation.inputs
    assert result.validation.outputs[0].samples["count"] >= held_out.HELD_OUT_SAMPLES
    assert held_out.TEXT_FILE.is_file() and sum(1 for _ in held_out.TEXT_FILE.open()) >= 200


def test_no_target_writes_the_model_and_exits_0_with_the_figures(tmp_path, capsys):
    model = _two_matmuls(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    x[:, 0] = 300.0  # int8 activations miss 0.99 on every sample: no target, still written
    np.savez(tmp_path / "val.npz", x=x)
    out = tmp_path / "q.onnx"
    code = main(["quantize", str(model), "-o", str(out), "--mode", "dynamic", "--int8-path", PIN, "--no-target",
                 "--validation-inputs", str(tmp_path / "val.npz"), "-q"])
    stdout = capsys.readouterr().out
    assert code == 0 and out.is_file()
    assert "FAILED" not in stdout and "measured (no accuracy target)" in stdout
    assert re.search(r"cosine 0\.\d+", stdout) and "per sample" in stdout


def test_static_without_calibration_says_what_it_needs_up_front(tmp_path, capsys):
    model = _two_matmuls(tmp_path / "m.onnx")
    out = tmp_path / "q.onnx"
    assert main(["quantize", str(model), "-o", str(out), "--mode", "static", "--int8-path", PIN, "-q"]) == 2
    err = capsys.readouterr().err
    assert "needs calibration data" in err and "--calibration generated" in err and "Traceback" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    assert main(["quantize", str(model), "-o", str(out), "--mode", "static", "--int8-path", PIN, "--calibration",
                 "generated", "--no-target", "-q"]) == 0  # random inputs, asked for
    assert out.is_file() and "generated" in capsys.readouterr().out


def test_static_without_calibration_calibrates_a_text_model_on_bundled_sentences(tmp_path, capsys):
    model = _text_model(tmp_path / "hf")
    out = tmp_path / "q.onnx"
    code = main(["quantize", str(model), "-o", str(out), "--mode", "static", "--int8-path", PIN, "--no-target",
                 "-q"])
    captured = capsys.readouterr()
    assert code == 0 and out.is_file(), captured.err
    assert "bundled English sentences" in captured.out and "generated random inputs" not in captured.out


def test_the_calibration_counter_never_passes_its_total(tmp_path):
    model = _two_matmuls(tmp_path / "m.onnx")
    feeds = open_feeds([{"x": np.ones((4, 256), np.float32)}] * 3, input_specs(onnx.load(str(model))))
    seen: list[str] = []
    calibrate(model, feeds, ["MatMul"], tmp_path, Reporter(lambda f, m: seen.append(m)))
    counters = [tuple(map(int, m.group(1, 2))) for s in seen if (m := re.search(r"batch (\d+)/(\d+)", s))]
    assert counters and all(done <= total for done, total in counters), counters
    assert counters[-1] == (3, 3)


def test_a_float16_model_not_faster_says_why():
    def bench(p50: float) -> ModelBench:
        return ModelBench("m.onnx", 10, 0.0, 5, 1, p50, p50, p50, p50, 1.0)

    def report(low: float, high: float) -> BenchReport:  # the paired latency ratio's interval
        return BenchReport([bench(1.0), bench(1.0)], "inputs", None, 1.0,
                           ratio=RatioEstimate((low + high) / 2, low, high, 10, 0.98))

    slower = report(1.3, 1.5)
    assert fp16_note(slower, "float16") == FP16_SLOWER and "without native float16" in FP16_SLOWER
    assert fp16_note(slower, "float32") is None
    assert fp16_note(report(0.9, 1.1), "float16") == FP16_SLOWER  # no measurable difference: not faster
    assert fp16_note(report(0.4, 0.6), "float16") is None


def test_static_with_calibration_and_validation_data_keeps_them_apart(tmp_path):
    """The calibration data sets the ranges; the search tunes on part of the validation inputs (not
    on the calibration data: the model fits the data its ranges came from); the verdict on the rest."""
    model = _two_matmuls(tmp_path / "m.onnx")
    rng = np.random.default_rng(2)
    np.savez(tmp_path / "cal.npz", x=rng.standard_normal((24, 256)).astype(np.float32))
    np.savez(tmp_path / "val.npz", x=rng.standard_normal((40, 256)).astype(np.float32))
    result = quantize(model, tmp_path / "q.onnx", "static",
                      QuantizeOptions(int8_path=PIN, calibration=tmp_path / "cal.npz",
                                      validation_inputs=tmp_path / "val.npz"))
    assert "held out" in result.validation.inputs and result.validation.outputs[0].samples["count"] == 16


def test_bundled_sentences_fit_a_fixed_batch_of_one(tmp_path):
    folder = tmp_path / "hf"
    model_path = _text_model(folder)
    model = onnx.load(str(model_path))
    for inp in model.graph.input:  # batch fixed at 1, as many exported HF models have it
        inp.type.tensor_type.shape.dim[0].dim_value = 1
    for out in model.graph.output:
        if out.type.tensor_type.HasField("shape") and out.type.tensor_type.shape.dim:
            out.type.tensor_type.shape.dim[0].dim_value = 1
    onnx.save(model, str(model_path))
    text = held_out.default_text(input_specs(model), model_path, None)
    assert text is not None and len(text) >= 2 * held_out.HELD_OUT_SAMPLES
    assert all(v.shape[0] == 1 for feed in text for v in feed.values())
