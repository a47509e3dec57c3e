"""`onnxport export` plans the selection once: the review's plan is the one the export writes."""

from __future__ import annotations

import sys

import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.export import inference_graph
from onnxport.core.graph import prune

from ...support.checkpoint_writer import write_checkpoint
from ..model_builders import eval_like_mlp, mlp_weights, param_set


def count_calls(monkeypatch, fn) -> list:
    """Every call of `fn`, through whichever onnxport module's binding of it."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return fn(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("onnxport.") and getattr(module, fn.__name__, None) is fn:
            monkeypatch.setattr(module, fn.__name__, counted)
    return calls


@pytest.mark.parametrize("outputs", [["--outputs", "logits"], []])  # named, or the suggested ones
def test_cli_export_plans_and_builds_the_graph_once(tmp_path, monkeypatch, capsys, outputs):
    import onnxport.core.cli.export_review  # noqa: F401  (loaded, so that its bindings are counted)
    import onnxport.core.workflow.export_job  # noqa: F401
    import onnxport.core.workflow.review  # noqa: F401

    eval_path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=16), eval_path)
    ckpt = write_checkpoint(tmp_path / "checkpoint", {k: v.array() for k, v in param_set(mlp_weights()).items()})
    plans = count_calls(monkeypatch, prune.plan_from)
    builds = count_calls(monkeypatch, inference_graph.build_inference_graph)
    out = tmp_path / "model.onnx"
    code = main(["export", str(eval_path), "--checkpoint", str(ckpt), *outputs, "-o", str(out), "-q"])
    assert code == 0, capsys.readouterr().err
    assert len(plans) == 1 and len(builds) == 1
    written = onnx.load(out)
    assert [o.name for o in written.graph.output][:1] == ["logits"] and len(written.graph.initializer) > 0
