"""`onnxport compare`: exit codes (0 compared, 1 with --check when they differ, 2 bad input), the JSON
object's shape, and an eval graph + checkpoint equal to its own export."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from onnxport.core.cli import main
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *args], capture_output=True, text=True)


@pytest.fixture
def pair(tmp_path):
    w = mlp_weights()
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(forward_mlp(w), str(a))
    onnx.save(forward_mlp(dict(w, **{"fc1.weight": w["fc1.weight"] * np.float32(1.5)})), str(b))
    return a, b


def test_check_exits_0_against_itself_and_1_against_a_changed_copy(pair, capsys):
    a, b = pair
    assert main(["compare", str(a), str(a), "--check", "-q"]) == 0
    out = capsys.readouterr().out
    assert "no difference beyond tolerance" in out and "first divergence: none" in out
    assert main(["compare", str(a), str(b), "--check", "-q"]) == 1
    out = capsys.readouterr().out
    assert "weight fc1.weight (initializer)" in out and "first divergence: /fc1/Transpose (Transpose)" in out  # the weight goes through it first
    assert main(["compare", str(a), str(b), "-q"]) == 0  # without --check: compared is success


def test_json_has_the_documented_shape(pair, capsys):
    a, b = pair
    assert main(["compare", str(a), str(b), "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    s, n = data["structure"], data["numeric"]
    assert set(s) >= {"nodes_added", "nodes_removed", "nodes_changed", "initializers_changed", "inputs", "outputs",
                      "opsets", "ir_version", "metadata"}
    assert [w["name"] for w in s["initializers_changed"]] == ["fc1.weight"]
    assert set(s["initializers_changed"][0]) >= {"name", "max_abs", "rel_l2"}
    assert {o["name"] for o in n["outputs"]} == {"logits", "probabilities"}
    assert all(set(o) >= {"name", "cosine", "max_abs"} for o in n["outputs"])
    assert all(set(t) >= {"name", "node", "cosine", "max_abs"} for t in n["tensors"])
    assert n["first_divergence"]["node"] == "/fc1/Transpose" and n["first_divergence"]["name"] == "fc1.wT"


def test_an_eval_graph_and_checkpoint_equal_their_export(tmp_path, capsys):
    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), str(eval_path))
    ckpt = write_checkpoint(tmp_path / "checkpoint", mlp_weights())
    export = tmp_path / "inference.onnx"
    assert main(["export", str(eval_path), "--checkpoint", str(ckpt), "--outputs", "logits,probabilities",
                 "-o", str(export), "-q"]) == 0
    capsys.readouterr()
    assert main(["compare", str(eval_path), str(export), "--checkpoint-a", str(ckpt), "--json", "--check",
                 "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    outputs = {o["name"]: o for o in data["numeric"]["outputs"]}
    assert set(outputs) == {"logits", "probabilities"}  # B's outputs, found among A's tensors
    assert all(o["max_abs"] <= 1e-6 and not o["departs"] for o in outputs.values())
    assert data["numeric"]["first_divergence"] is None
    removed = {n["op"] for n in data["structure"]["nodes_removed"]}
    assert "SoftmaxCrossEntropyLoss" in removed  # the eval graph's loss is no part of the export


def test_bad_input_exits_2_with_one_line(tmp_path, pair):
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    for args in ([str(text), str(pair[0])], [str(pair[0]), str(tmp_path / "missing.onnx")]):
        proc = cli("compare", *args)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    fake = tmp_path / "fake.onnx"
    fake.write_text("hello, this is text\n")
    proc = cli("compare", str(fake), str(pair[0]), "--check")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
