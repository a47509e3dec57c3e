"""Generated and given inputs on real models (PP-OCR detector/classifier/recogniser, silero-vad):
validate, bench and quantize end in exit 0 or one clear line (exit 2), never a crash (136), and
leave no staging folder. The CLI runs in a child, as a user runs it: a native crash fails the test
instead of taking pytest down."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .corpus import ocr_classifier, ocr_detector, ocr_recognizer, silero_vad

MODELS = {"classifier": ocr_classifier, "recognizer": ocr_recognizer, "detector": ocr_detector, "silero": silero_vad}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *map(str, args), "-q"], capture_output=True,
                          text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", MODELS)
def test_validate_and_bench_on_generated_inputs(name):
    model = MODELS[name]()
    proc = cli("validate", model, "--reference", model)
    assert proc.returncode == 0, proc.stderr
    assert "validation PASSED" in proc.stdout and "generated batch(es)" in proc.stdout
    proc = cli("bench", model, "--seconds", "0.05")
    assert proc.returncode == 0, proc.stderr
    assert model.name in proc.stdout and "samples/s" in proc.stdout


def test_silero_gets_a_sample_rate_it_knows_and_a_batch_on_the_states_axis_1():
    proc = cli("validate", silero_vad(), "--reference", silero_vad())
    assert proc.returncode == 0, proc.stderr
    assert "sr=16000" in proc.stdout and "state[2, 2, 128]" in proc.stdout and "input[2, " in proc.stdout


@pytest.mark.parametrize("name", MODELS)
def test_dynamic_quantize_ends_cleanly_and_leaves_no_staging_folder(name, tmp_path):
    out = tmp_path / "q.onnx"
    proc = cli("quantize", MODELS[name](), "-o", out, "--mode", "dynamic")
    assert proc.returncode == 0 or one_line_error(proc), (proc.returncode, proc.stderr)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["q.onnx"] if proc.returncode == 0 else []), left


@pytest.mark.parametrize("name", ["classifier", "recognizer"])
def test_given_shape_is_used(name):
    model = MODELS[name]()
    proc = cli("validate", model, "--reference", model, "--shape", "x=1x3x48x192")
    assert proc.returncode == 0, proc.stderr
    assert "x[1, 3, 48, 192]" in proc.stdout
    proc = cli("bench", model, "--shape", "x=1x3x48x192", "--seconds", "0.05")
    assert proc.returncode == 0 and "x[1, 3, 48, 192]" in proc.stdout, proc.stderr


def test_a_shape_the_detector_cannot_take_is_one_line_naming_it():
    proc = cli("validate", ocr_detector(), "--reference", ocr_detector(), "--shape", "x=1x3x48x192")
    assert one_line_error(proc), proc.stderr
    assert "ONNX Runtime cannot run it on inputs x[1, 3, 48, 192]" in proc.stderr
    proc = cli("bench", ocr_detector(), "--shape", "x=1x3x64x192", "--seconds", "0.05")  # multiples of 32
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shape", [None, "x=1x3x48x192"])
def test_export_validate_with_generated_and_given_shapes(tmp_path, shape):
    out = tmp_path / "rec.onnx"
    proc = cli("export", ocr_recognizer(), "--outputs", "softmax_11.tmp_0", "-o", out, "--validate",
               *(["--shape", shape] if shape else []))
    assert proc.returncode == 0, proc.stderr
    assert "export validation PASSED" in proc.stdout and out.is_file()
    if shape:
        assert "x[1, 3, 48, 192]" in proc.stdout


def test_export_validate_with_a_shape_the_model_refuses_writes_nothing(tmp_path):
    proc = cli("export", ocr_detector(), "--outputs", "sigmoid_0.tmp_0", "-o", tmp_path / "det.onnx", "--validate",
               "--shape", "x=1x3x48x192")
    assert one_line_error(proc) and "x[1, 3, 48, 192]" in proc.stderr and "nothing written" in proc.stderr
    assert list(tmp_path.iterdir()) == []
