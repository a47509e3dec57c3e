"""The training boundary: ORT's training API runs in its own environment, behind a child process.

Checked here: the CLI's `artifacts` through the boundary; one clear line (exit 2) where no
training environment exists; errors of ORT carried across as one line; a cancel kills the child
and leaves no file; a child that dies is reported, not hung on; and onnxport's own environment
never holds the training package.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.cli import main
from onnxport.core.training.artifacts import generate_training_artifacts
from onnxport.core.training.environment import ENV_VARIABLE
from onnxport.core.training.process import TrainingProcess
from onnxport.core.util.errors import Cancelled, OnnxportError, UnavailableError
from onnxport.core.util.progress import CancelToken

from ..model_builders import forward_mlp


def test_app_environment_is_current_and_free_of_the_training_package():
    import onnxruntime

    assert importlib.util.find_spec("onnxruntime.training") is None
    major, minor = (int(x) for x in onnxruntime.__version__.split(".")[:2])
    assert (major, minor) > (1, 19), onnxruntime.__version__


def test_without_training_environment_artifacts_says_how_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "no-such-python"))
    forward = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), forward)
    assert main(["artifacts", str(forward), "-o", str(tmp_path / "arts"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "training environment" in err[0] and "make training-env" in err[0]
    assert not (tmp_path / "arts").exists()
    with pytest.raises(UnavailableError):
        generate_training_artifacts(forward, tmp_path / "arts")


def test_a_dying_child_is_one_line_not_a_hang(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'boom: the environment is broken' >&2\nexit 3\n")
    fake.chmod(0o755)
    with TrainingProcess(fake) as training, pytest.raises(OnnxportError, match=r"exit status 3\): boom"):
        training.call("ping", {})


# ---- with the training environment ------------------------------------------------------------

@pytest.fixture(scope="module")
def helpers():
    return pytest.importorskip("tests.core.ort_training_helpers")


@pytest.fixture
def trainable_forward(tmp_path, helpers) -> Path:
    forward = tmp_path / "forward.onnx"
    onnx.save(helpers.mlp_two_outputs().model, forward)
    return forward


@pytest.mark.training
def test_cli_artifacts_through_the_boundary(tmp_path, trainable_forward, capsys):
    forward = trainable_forward
    out = tmp_path / "arts"
    assert main(["artifacts", str(forward), "-o", str(out), "-q"]) == 0
    assert "wrote training artifacts" in capsys.readouterr().out
    names = {p.name for p in out.iterdir()}
    assert {"training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint"} <= names
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


@pytest.mark.training
def test_ort_errors_come_back_as_one_line(tmp_path, helpers):
    """A trainable weight reached only through an op without a gradient in ORT (Floor)."""
    graph = helper.make_graph(
        [helper.make_node("Floor", ["w"], ["wf"]), helper.make_node("MatMul", ["x", "wf"], ["y"])],
        "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 2])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 2])],
        [helper.make_tensor("w", T.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    with pytest.raises(OnnxportError) as info:
        generate_training_artifacts(model, tmp_path / "arts", loss="mse", training=helpers.training_process())
    line = info.value.one_line()
    assert "onnxruntime.training could not build the training graph" in line and "\n" not in line
    assert not (tmp_path / "arts").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.training
def test_cancel_stops_the_call_and_leaves_nothing(tmp_path, trainable_forward):
    """One cancel semantics (util/child_call.py): the call ends Cancelled, its temps are removed,
    and the child (still running the C++ call after the grace period: killed) serves the next call."""
    forward = trainable_forward
    out = tmp_path / "arts"
    cancel = CancelToken()
    with TrainingProcess() as training:
        training.call("ping", {})  # started and warm
        seen = []

        def progress(fraction, message):  # cancel once the child is at work on the gradient graph
            seen.append(message)
            if "gradient graph" in message:
                cancel.cancel()

        with pytest.raises(Cancelled):
            generate_training_artifacts(forward, out, progress=progress, cancel=cancel, training=training)
        assert any("gradient graph" in m for m in seen)
        assert training.call("ping", {})["onnxruntime"] == "1.19.2"  # a fresh child serves the next call
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["forward.onnx"]


@pytest.mark.training
def test_artifacts_cli_in_a_plain_process_imports_no_training_package(tmp_path, trainable_forward):
    """`onnxport artifacts` in a fresh process: ORT's training package is only in the child."""
    forward = trainable_forward
    code = ("import sys, runpy; sys.argv = ['onnxport', 'artifacts', sys.argv[1], '-o', sys.argv[2], '-q'];\n"
            "from onnxport.core.cli import main; rc = main(sys.argv[1:]);\n"
            "assert 'onnxruntime.training' not in sys.modules and 'torch' not in sys.modules; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(forward), str(tmp_path / "arts")],
                          capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "arts" / "checkpoint").is_file()


@pytest.mark.training
@pytest.mark.parametrize("out", ["arts", "./arts", "sub/arts"])
def test_cli_artifacts_to_a_relative_folder(tmp_path, trainable_forward, monkeypatch, capsys, out):
    """The child runs in another folder: paths are made absolute at the boundary, not read there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert main(["artifacts", "forward.onnx", "-o", out, "-q"]) == 0, capsys.readouterr().err
    assert (tmp_path / out / "checkpoint").is_file() and (tmp_path / out / "eval_model.onnx").is_file()
    assert [p.name for p in tmp_path.rglob(".*")] == []  # no temp left


@pytest.mark.training
@pytest.mark.torch
def test_torch_export_artifacts_to_a_relative_folder(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)).eval()
    program = torch.export.export(module, (torch.randn(2, 8),))
    torch.export.save(program, "mlp.pt2")
    argv = ["torch-export", "mlp.pt2", "-o", "fwd.onnx", "--mode", "training", "--artifacts", "arts",
            "--trust-model-code", "-q"]
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "arts" / "checkpoint").is_file()
