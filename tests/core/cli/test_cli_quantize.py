"""`onnxport quantize`, `validate`, `bench` and `export --quantize --validate`, as DESIGN.md's contract says."""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.export.export import export_model

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights, param_set


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *args], capture_output=True, text=True)


@pytest.fixture
def fp32(tmp_path):
    forward = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), forward)
    out = tmp_path / "fp32.onnx"
    export_model(forward, out, ["logits"])  # inference form: no training-mode Dropout
    return out


def test_quantize_validate_bench_json(fp32, tmp_path, capsys):
    q = tmp_path / "int8.onnx"
    assert main(["quantize", str(fp32), "-o", str(q), "--mode", "dynamic", "--int8-path", "avx2", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert q.exists() and str(q) in json.dumps(data)
    assert data["quantize"]["options"]["reduce_range"] is True  # pinned: 7-bit weights, exact on every CPU
    code = main(["validate", str(q), "--reference", str(fp32), "--json", "-q"])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["passed"] else 1)
    assert {"max_abs_diff", "cosine"} <= set(report["validation"]["outputs"][0])
    assert main(["bench", str(fp32), str(q), "--seconds", "0.2", "--json", "-q"]) == 0
    bench = json.loads(capsys.readouterr().out)["bench"]
    assert len(bench["models"]) == 2 and {"p50_ms", "p90_ms", "throughput", "spread_pct", "repeat"} <= set(bench["models"][1])
    assert bench["size_ratio"] > 0 and bench["latency_ratio"] > 0


def test_export_with_validate_and_quantize(tmp_path, capsys):
    from tests.support.checkpoint_writer import write_checkpoint

    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=16), eval_path)
    ckpt = write_checkpoint(tmp_path / "checkpoint", {k: v.array() for k, v in param_set(mlp_weights()).items()})
    out = tmp_path / "model.onnx"
    code = main(["export", str(eval_path), "--checkpoint", str(ckpt), "--outputs", "logits", "-o", str(out),
                 "--validate", "--quantize", "fp16", "-q"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert out.exists() and (tmp_path / "model.fp16.onnx").exists() and (tmp_path / "model.report.json").exists()
    assert "PASSED" in text


@pytest.mark.parametrize("command", [
    ["quantize", "{bad}", "-o", "{out}", "--mode", "dynamic"],
    ["validate", "{bad}", "--reference", "{bad}"],
    ["bench", "{bad}"],
])
def test_bad_files_exit_2_with_one_line(tmp_path, command):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07" + bytes(range(256)))
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep me")
    proc = cli(*[a.format(bad=bad, out=out) for a in command])
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("onnxport: error:")]
    assert len(errors) == 1 and "broken.onnx" in errors[0] and "Traceback" not in proc.stderr
    assert out.read_bytes() == b"keep me"
