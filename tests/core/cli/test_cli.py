"""The CLI contract: exit codes, one-line errors without tracebacks, outputs never half-written."""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.util.distributed import current_rank, skip_reason

from ..model_builders import forward_mlp


@pytest.fixture
def forward(tmp_path):
    path = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), path)
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *args], capture_output=True, text=True)


def test_export_and_inspect_json(forward, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    assert main(["export", str(forward), "--outputs", "probabilities", "-o", str(out), "-q"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["inspect", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in data["model"]["outputs"]] == ["probabilities"]
    assert data["model"]["inputs"][0]["name"] == "input"


def test_unknown_output_exits_2_with_one_line_and_suggestion(forward, tmp_path):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep me")
    proc = cli("export", str(forward), "--outputs", "probabilites", "-o", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "unknown output 'probabilites'" in lines[0] and "'probabilities'" in lines[0]
    assert out.read_bytes() == b"keep me"


@pytest.mark.parametrize("content", [b"", b"garbage" * 10, b"\x08\x07" + b"\xff" * 50])
def test_corrupt_model_is_a_clear_error(tmp_path, content):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    proc = cli("inspect", str(bad))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "bad.onnx" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file_and_unwritable_destination(forward, tmp_path):
    proc = cli("export", str(tmp_path / "nope.onnx"), "--outputs", "x", "-o", str(tmp_path / "o.onnx"))
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = cli("export", str(forward), "--outputs", "logits", "-o", "/proc/onnxport-test/o.onnx")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_rank_detection_and_non_zero_rank_skips(forward, tmp_path, monkeypatch):
    assert current_rank({"OMPI_COMM_WORLD_RANK": "3"}) == 3
    assert current_rank({}) is None
    assert skip_reason(environ={"RANK": "0"}) is None
    assert skip_reason(all_ranks=True, environ={"PMI_RANK": "2"}) is None
    monkeypatch.setenv("RANK", "1")
    out = tmp_path / "o.onnx"
    proc = cli("export", str(forward), "--outputs", "logits", "-o", str(out))
    assert proc.returncode == 0 and "only rank 0 writes" in proc.stderr and not out.exists()
    proc = cli("export", str(forward), "--outputs", "logits", "-o", str(out), "--all-ranks", "-q")
    assert proc.returncode == 0 and out.exists()
