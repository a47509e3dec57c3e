"""How a run ends when something goes wrong, for the reader at the other end: a closed stdout
pipe ends quietly; with --json an error is JSON on stdout too; a checkpoint given as the model
says to pass it with --checkpoint; the Python API's unknown-output error says "did you mean" as
the CLI does; an output no input changes (a Dropout mask, a Constant) is exported with a warning."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.api import export_for_inference
from onnxport.core.cli import main
from onnxport.core.util.errors import OnnxportError

from ...support.checkpoint_writer import write_checkpoint
from ..model_builders import forward_mlp, make_model, mlp_weights


def _long_chain(path, nodes: int = 1500) -> None:
    """A model whose `inspect --json` is far bigger than a pipe's buffer (64 KiB)."""
    chain = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"/block{i}/Relu") for i in range(nodes)]
    model = make_model(chain, [helper.make_tensor_value_info("t0", T.FLOAT, [1, 4])],
                       [helper.make_tensor_value_info(f"t{nodes}", T.FLOAT, [1, 4])])
    onnx.save(model, str(path))


def test_a_closed_stdout_ends_quietly(tmp_path):
    model = tmp_path / "chain.onnx"
    _long_chain(model)
    proc = subprocess.Popen([sys.executable, "-m", "onnxport.core.cli", "inspect", str(model), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)  # `| head -c 10`: read a little, then go away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) in (0, 141), err
    assert err == ""  # no "Broken pipe" line, no "Exception ignored" traceback


def test_json_errors_are_json_on_stdout(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "missing.onnx"), "--json"]) == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert "missing.onnx: no such file" in error["message"] and error["kind"]
    assert captured.err.count("\n") == 1 and captured.err.startswith("onnxport: error: ")
    assert main(["inspect", str(tmp_path / "missing.onnx")]) == 2  # without --json: stderr only
    assert capsys.readouterr().out == ""


def test_json_usage_errors_are_json_on_stdout(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["export", str(tmp_path / "m.onnx"), "--json"])  # no -o
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"] == {"message": "the following arguments are required: -o/--output",
                                                 "kind": "UsageError"}
    assert "usage: onnxport export" in captured.err


def test_a_checkpoint_given_as_the_model_says_where_it_goes(tmp_path, capsys):
    ckpt = tmp_path / "checkpoint"
    write_checkpoint(ckpt, mlp_weights())
    np.savez(tmp_path / "params.npz", **mlp_weights())
    for source in (ckpt, tmp_path / "params.npz"):
        assert main(["export", str(source), "--outputs", "y", "-o", str(tmp_path / "out.onnx")]) == 2
        err = capsys.readouterr().err
        assert "not a model: pass it with --checkpoint" in err and "Wire format" not in err, err
    assert not (tmp_path / "out.onnx").exists()


def test_the_api_unknown_output_error_says_did_you_mean(tmp_path):
    onnx.save(forward_mlp(), str(tmp_path / "m.onnx"))
    with pytest.raises(OnnxportError) as info:
        export_for_inference(tmp_path / "m.onnx", None, ["probabilites"], tmp_path / "out.onnx")
    assert "did you mean 'probabilities'?" in str(info.value)  # what a Python traceback shows
    assert str(info.value) in info.value.one_line()  # and the CLI's line says the same


def test_a_dropout_mask_or_a_constant_output_is_exported_with_a_warning(tmp_path, capsys):
    model = forward_mlp()
    model.graph.node.append(helper.make_node("Constant", [], ["flag"], name="flag",
                                             value=helper.make_tensor("v", T.BOOL, [], [True])))
    onnx.save(model, str(tmp_path / "m.onnx"))
    out = tmp_path / "out.onnx"
    assert main(["export", str(tmp_path / "m.onnx"), "--outputs", "probabilities,mask,flag", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: output 'mask' is a Dropout's mask: all True" in err
    assert "warning: output 'flag' reads no input" in err
    assert "'probabilities'" not in err
    assert main(["export", str(tmp_path / "m.onnx"), "--outputs", "mask", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["export"]
    assert list(report["fixed_outputs"]) == ["mask"]
