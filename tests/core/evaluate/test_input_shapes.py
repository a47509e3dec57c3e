"""Inputs that fit the model: scalars, batch-not-first states, unnamed dims set by --shape/--dim,
sizes and values fitted by a first run in a child, ORT failures and native crashes as one line."""

from __future__ import annotations

import platform
import subprocess
import sys

import numpy as np
import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.evaluate.feeds import open_feeds
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.input_shapes import ShapePlan, batch_axis, model_stride
from onnxport.core.evaluate.input_specs import input_specs
from onnxport.core.evaluate.input_values import value_choices
from onnxport.core.evaluate.validate import validate
from onnxport.core.util.errors import OnnxportError

from .. import input_models
from ..quant_models import encoder, save


def _specs(model: onnx.ModelProto) -> dict:
    return {s.name: s for s in input_specs(model)}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_scalar_input_in_an_npz_goes_with_every_batch(tmp_path):
    path = save(input_models.scaled(), tmp_path / "scaled.onnx")
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.savez(tmp_path / "data.npz", x=x, scale=np.array(3.0))
    feeds = list(open_feeds(tmp_path / "data.npz", input_specs(input_models.scaled()), batch_size=2))
    assert [f["x"].shape for f in feeds] == [(2, 4), (2, 4), (1, 4)]
    assert all(f["scale"].shape == () and f["scale"] == 3.0 and f["scale"].dtype == np.float32 for f in feeds)
    np.testing.assert_array_equal(np.concatenate([f["x"] for f in feeds]), x)
    report = validate(path, path, inputs=tmp_path / "data.npz")
    assert report.passed and report.batches == 1  # validation batches hold 8 samples


def test_state_with_batch_on_axis_1_is_cut_along_axis_1(tmp_path):
    specs = _specs(input_models.rnn_step())
    assert batch_axis(specs["state"]) == 1 and batch_axis(specs["input"]) == 0
    rng = np.random.default_rng(0)
    data = {"input": rng.standard_normal((5, 8)).astype(np.float32),
            "state": rng.standard_normal((2, 5, 4)).astype(np.float32)}
    np.savez(tmp_path / "d.npz", **data)
    feeds = list(open_feeds(tmp_path / "d.npz", list(specs.values()), batch_size=2))
    assert [f["state"].shape for f in feeds] == [(2, 2, 4), (2, 2, 4), (2, 1, 4)]
    np.testing.assert_array_equal(np.concatenate([f["state"] for f in feeds], axis=1), data["state"])
    path = save(input_models.rnn_step(), tmp_path / "rnn.onnx")
    assert validate(path, path, inputs=tmp_path / "d.npz").passed
    one = {"input": data["input"][0], "state": data["state"][:, 0]}  # one sample without its batch axis
    assert open_feeds(one, list(specs.values())).first()["state"].shape == (2, 1, 4)
    np.savez(tmp_path / "bad.npz", input=data["input"], state=data["state"][:, :3])
    with pytest.raises(OnnxportError, match=r"disagree on the number of samples.*state\[2, 3, 4\] \(axis 1\)"):
        open_feeds(tmp_path / "bad.npz", list(specs.values()))


def test_generated_state_shares_the_batch_of_the_input(tmp_path):
    path = save(input_models.rnn_step(), tmp_path / "rnn.onnx")
    feed = fitted_feeds(path).first()
    assert feed["input"].shape == (2, 8) and feed["state"].shape == (2, 2, 4)
    assert validate(path, path).passed


def test_unnamed_dims_are_set_by_shape_or_input_axis(tmp_path, capsys):
    path = save(input_models.unnamed_image(), tmp_path / "img.onnx")
    spec = _specs(input_models.unnamed_image())["x"]
    assert spec.shape == (None, 3, None, None)  # -1 and '?' are unnamed, and two '?' are not one size
    assert main(["validate", str(path), "--reference", str(path), "--shape", "x=1x3x48x192", "-q"]) == 0
    assert "x[1, 3, 48, 192]" in capsys.readouterr().out
    assert main(["bench", str(path), "--dim", "x:2=48", "--dim", "x:3=20", "--seconds", "0.05", "-q"]) == 0
    assert "x[1, 3, 48, 20]" in capsys.readouterr().out


def test_named_dim_is_set_by_dim_and_defaults_to_a_sequence_of_128(tmp_path, capsys):
    path = save(input_models.sequence_model(), tmp_path / "seq.onnx")
    assert ShapePlan(input_specs(input_models.sequence_model())).shapes() == {"x": (2, 128)}
    assert main(["validate", str(path), "--reference", str(path), "--dim", "seq=7", "-q"]) == 0
    assert "x[2, 7]" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--shape", "y=1x2"], "--shape y=...: the model has no input 'y' (its inputs: x)"),
    (["--shape", "x=2x3x4"], "--shape x: 3 sizes given, input x: float32[batch, seq] has rank 2"),
    (["--shape", "x=2xfour"], "--shape expects INPUT=SIZExSIZE"),
    (["--dim", "sequence=7"], "--dim sequence: the model's inputs have no dimension 'sequence' (dynamic ones: batch, seq"),
    (["--dim", "seq=0"], "--dim expects NAME=SIZE with a positive size"),
])
def test_bad_sizes_are_one_line_errors(tmp_path, args, message):
    path = save(input_models.sequence_model(), tmp_path / "seq.onnx")
    proc = cli("validate", str(path), "--reference", str(path), *args, "-q")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert message in proc.stderr


def test_a_fixed_dim_cannot_be_overridden():
    specs = input_specs(input_models.unnamed_image())
    with pytest.raises(OnnxportError, match="has 3 on axis 1, not 4"):
        ShapePlan(specs, shapes={"x": (1, 4, 8, 8)})


def test_metadata_shape_fills_unnamed_dims_but_not_the_batch():
    model = input_models.unnamed_image()
    model.metadata_props.add(key="x.shape", value="[1, 3, 48, 192]")
    assert ShapePlan(input_specs(model), model).shapes()["x"] == (2, 3, 48, 192)


def test_image_sizes_follow_the_model_stride_per_axis():
    assert model_stride(input_models.strided_cnn((2, 2))) == (4, 4)
    model = input_models.strided_cnn((3, 2))
    assert model_stride(model) == (9, 4)
    assert ShapePlan(input_specs(model), model).shapes()["x"] == (2, 3, 225, 224)  # 224 rounded up to 9 and 4


def test_sample_rate_comes_from_the_constant_it_is_compared_with(tmp_path):
    model = input_models.sample_rate_branch()
    assert value_choices(model, input_specs(model)) == {"sr": [16000, 1]}
    path = save(model, tmp_path / "vad.onnx")
    feeds = fitted_feeds(path)
    assert feeds.first()["sr"] == 16000 and "sr=16000" in feeds.description
    assert validate(path, path).passed


def test_sizes_the_model_refuses_fall_back_to_ones_it_runs(tmp_path):
    path = save(encoder(max_len=32), tmp_path / "enc.onnx")  # a position table of 32 rows
    feeds = fitted_feeds(path)
    assert feeds.first()["input_ids"].shape == (2, 32)
    assert "did not run on input_ids[2, 128]" in feeds.description
    assert validate(path, path).passed


def test_ort_failure_is_one_line_naming_the_shapes(tmp_path):
    path = save(input_models.rows_of_twelve(), tmp_path / "rows.onnx")
    proc = cli("validate", str(path), "--reference", str(path), "-q")  # no guessed size has 12k values
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "rows.onnx: ONNX Runtime cannot run it on inputs x[2, 128]: " in proc.stderr
    assert "other size(s) failed too" in proc.stderr and "--shape x=2x?" in proc.stderr
    assert cli("validate", str(path), "--reference", str(path), "--shape", "x=2x6", "-q").returncode == 0
    np.savez(tmp_path / "d.npz", x=np.ones((1, 5), np.float32))  # a user's file: run in this process
    with pytest.raises(OnnxportError, match=r"rows.onnx: ONNX Runtime failed on inputs x\[1, 5\]: .*Reshape"):
        validate(path, path, inputs=tmp_path / "d.npz")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 traps int64 division overflow")
def test_native_crash_in_the_first_run_is_one_line_and_leaves_nothing(tmp_path):
    path = save(input_models.sigfpe(), tmp_path / "crash.onnx")
    probe = subprocess.run([sys.executable, "-c", "import onnxruntime as o, numpy as np; o.InferenceSession("
                            f"{str(path)!r}).run(None, {{'x': np.ones(2, np.int64)}})"], capture_output=True)
    assert probe.returncode == -8  # the model really kills a process that runs it (SIGFPE)
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["validate", str(path), "--reference", str(path)], ["bench", str(path), "--seconds", "0.05"],
                 ["quantize", str(path), "-o", str(tmp_path / "q.onnx"), "--mode", "dynamic"]):
        proc = cli(*args, "-q")
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "ONNX Runtime crashed (SIGFPE) running crash.onnx on inputs x[" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no staging folder, no output
