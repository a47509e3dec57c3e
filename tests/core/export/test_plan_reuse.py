"""`ExportOptions.plan`: a caller's prune plan is written from only when it is this export's plan."""

from __future__ import annotations

import onnx

from onnxport.core.export.export import export_model
from onnxport.core.export.export_options import ExportOptions
from onnxport.core.graph.prune import plan_prune

from ..model_builders import eval_like_mlp, mlp_weights, param_set


def test_a_plan_made_without_the_parameters_is_planned_again(tmp_path):
    source = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), source)
    params = param_set(mlp_weights())
    model = onnx.load(source)
    made_before = plan_prune(model, ["logits"])  # no parameter names: they would stay inputs
    out = tmp_path / "out.onnx"
    export_model(source, out, ["logits"], params, options=ExportOptions(plan=made_before))
    assert [i.name for i in onnx.load(out).graph.input] == ["input"]
    mine = plan_prune(model, ["logits"], set(params))
    other = tmp_path / "other.onnx"
    export_model(source, other, ["logits"], params, options=ExportOptions(plan=mine))  # this export's plan
    assert [i.name for i in onnx.load(other).graph.input] == ["input"]
