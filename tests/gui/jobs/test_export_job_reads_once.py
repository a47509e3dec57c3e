"""The app's Export runs the one pipeline (core/workflow/export_job.py) on the open's sources:
quantizing after the export reads no parameter file again (issue 28 item 1: its child read and
aligned the checkpoint the open had read, although only the quantization ran)."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.util.progress import CancelToken
from onnxport.core.workflow.sources import open_sources
from onnxport.gui.dialogs.export_dialog import ExportChoices
from onnxport.gui.jobs.core_calls import export_job

from ...core.model_builders import eval_like_mlp, mlp_weights, param_set


@pytest.mark.parametrize("validate", [False, True])
def test_quantizing_after_the_export_reads_no_checkpoint_again(tmp_path, validate):
    from tests.support.checkpoint_writer import write_checkpoint

    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=16), eval_path)
    ckpt = write_checkpoint(tmp_path / "checkpoint", {k: v.array() for k, v in param_set(mlp_weights()).items()})
    sources = open_sources([eval_path, ckpt])
    replaced = []

    def progress(fraction, message):
        if message in ("exporting: done", "validating: validated"):  # written (and validated): it may go
            ckpt.write_bytes(b"not a checkpoint any more")
            replaced.append(message)

    out = tmp_path / "model.onnx"
    result, post = export_job(sources, ["logits"], ExportChoices(out, quantize="fp16", validate=validate))(
        progress, CancelToken())
    assert replaced == ["validating: validated" if validate else "exporting: done"]
    assert result.path == out and post.quantize is not None and (tmp_path / "model.fp16.onnx").exists()
    assert (post.validation is not None) == validate
