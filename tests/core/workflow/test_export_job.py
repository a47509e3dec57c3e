"""The one export pipeline (workflow/export_job.py): what the open computed is not computed again."""

from __future__ import annotations

import onnx

from onnxport.core.cli import main
from onnxport.core.io import readers
from onnxport.core.workflow.export_job import IN_PROCESS, ExportRequest, run_export
from onnxport.core.workflow.sources import open_sources

from ..model_builders import eval_like_mlp, mlp_weights, param_set


def eval_and_checkpoint(tmp_path, d_hidden: int = 16):
    from tests.support.checkpoint_writer import write_checkpoint

    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=d_hidden), eval_path)
    weights = param_set(mlp_weights(d_hidden=d_hidden))
    ckpt = write_checkpoint(tmp_path / "checkpoint", {k: v.array() for k, v in weights.items()})
    return eval_path, ckpt


def counting_reads(monkeypatch) -> list:
    """Every read of a parameter file, whichever module asks."""
    reads, real = [], readers.read_parameters

    def read_parameters(path, *args, **kwargs):
        reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(readers, "read_parameters", read_parameters)
    return reads


def test_cli_export_validate_quantize_reads_the_checkpoint_once(tmp_path, monkeypatch, capsys):
    eval_path, ckpt = eval_and_checkpoint(tmp_path)
    reads = counting_reads(monkeypatch)
    out = tmp_path / "model.onnx"
    code = main(["export", str(eval_path), "--checkpoint", str(ckpt), "--outputs", "logits", "-o", str(out),
                 "--validate", "--quantize", "fp16", "-q"])
    assert code == 0, capsys.readouterr().err
    assert "PASSED" in capsys.readouterr().out
    assert len(reads) == 1  # the export, its validation and the quantization share one read


def test_the_apps_sources_export_validate_quantize_without_reading_again(tmp_path, monkeypatch):
    eval_path, ckpt = eval_and_checkpoint(tmp_path)
    sources = open_sources([eval_path, ckpt])
    reads = counting_reads(monkeypatch)
    out = tmp_path / "model.onnx"
    outcome = run_export(sources, ExportRequest(["logits"], out, validate=True, quantize="fp16"), IN_PROCESS)
    assert reads == []
    assert outcome.post is not None and outcome.post.passed
    assert out.exists() and (tmp_path / "model.fp16.onnx").exists() and (tmp_path / "model.report.json").exists()
    assert outcome.export.outputs == ["logits"]


def test_the_api_runs_the_one_pipeline(tmp_path, monkeypatch):
    import onnxport.core.api as api
    from onnxport.core.workflow import export_job

    eval_path, ckpt = eval_and_checkpoint(tmp_path)
    runs, checked = [], []

    real = export_job.run_export

    def run_export(*args, **kwargs):
        runs.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(export_job, "run_export", run_export)
    out = tmp_path / "model.onnx"
    result = api.export_for_inference(eval_path, ckpt, ["logits"], out, verify=checked.append)
    assert [r.outputs for r in runs] == [["logits"]] and checked and not checked[0].exists()
    assert result.path == out and out.exists() and result.outputs == ["logits"] and result.skipped is None


def test_the_api_on_a_non_zero_rank_reads_and_writes_nothing(tmp_path, monkeypatch):
    from onnxport.core.api import export_for_inference

    eval_path, ckpt = eval_and_checkpoint(tmp_path)
    reads = counting_reads(monkeypatch)
    monkeypatch.setenv("RANK", "1")
    out = tmp_path / "model.onnx"
    result = export_for_inference(eval_path, [ckpt], ["logits"], out)
    assert "only rank 0 writes" in result.skipped and not out.exists() and reads == []
    assert export_for_inference(eval_path, [ckpt], ["logits"], out, all_ranks=True).skipped is None and out.exists()


def test_the_request_carries_every_quantize_choice_to_the_quantizer(tmp_path):
    """The app's dialog sets the target, validation inputs, int8 path, exclusions... through the one
    request the CLI uses (issue 35): each reaches `quantize` and shows in the report."""
    import numpy as np

    from onnxport.core.quantize.options import QuantizeOptions

    eval_path, ckpt = eval_and_checkpoint(tmp_path, d_hidden=512)  # big enough for int8 to be smaller
    sources = open_sources([eval_path, ckpt])
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, input=np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32))
    options = QuantizeOptions(accuracy_target=None, validation_inputs=inputs, int8_path="avx512-vnni",
                              per_channel=False, exclude_nodes=["/fc2/MatMul"])
    out = tmp_path / "model.onnx"
    outcome = run_export(sources, ExportRequest(["logits"], out, quantize="dynamic", quantize_options=options),
                         IN_PROCESS)
    q = outcome.post.report["quantize"]
    assert q["target"] is None and q["options"]["accuracy_target"] is None
    assert q["options"]["int8_path"] == "avx512-vnni" and q["int8_path"].endswith("8-bit weights, pinned")
    assert q["options"]["per_channel"] is False
    assert q["excluded_nodes"] == ["/fc2/MatMul/MatMulAddFusion"]  # the node asked for, as ORT's optimizer renamed it
    assert "inputs.npz" in q["validation"]["inputs"]  # validated on the given inputs, not generated ones
