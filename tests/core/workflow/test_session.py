"""One session per opened model (issue 37 item 1): its plans and inference graphs are made once per
selection and kept inside it, the CLI and the app open it by one builder, and the export takes
only choices - a changed input is a new session, so nothing stale is ever written."""

from __future__ import annotations

import onnx

from onnxport.core.export.export import export_selection
from onnxport.core.graph import prune
from onnxport.core.workflow.sources import open_session, open_sources
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import eval_like_mlp, mlp_weights


def _example(tmp_path, seed: int = 0):
    model = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), model)
    return model, write_checkpoint(tmp_path / f"checkpoint{seed}", mlp_weights(seed=seed))


def test_a_session_plans_and_builds_each_selection_once(tmp_path, monkeypatch):
    model, ckpt = _example(tmp_path)
    session = open_session(model, [ckpt])
    calls = []
    real = prune.plan_from
    monkeypatch.setattr("onnxport.core.graph.graph_table.plan_from", lambda *a, **k: calls.append(1) or real(*a, **k))
    plan = session.plan(["logits"])
    assert session.plan(["logits"]) is plan and len(calls) == 1
    assert plan.parameter_inputs == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    selected = session.selection(["logits"])
    assert session.selection(["logits"]) is selected and selected.built.plan is plan and len(calls) == 1
    summary = session.summary(["logits"])
    assert summary.kept_nodes == len(selected.preview.graph.node) and len(calls) == 1


def test_the_cli_and_the_app_open_the_same_session(tmp_path):
    model, ckpt = _example(tmp_path)
    cli, app = open_session(model, [ckpt]), open_sources([ckpt, model])
    assert app.index is not None and cli.index is None
    assert (cli.model_path, cli.param_paths, cli.match.matched) == (app.model_path, app.param_paths, app.match.matched)
    assert cli.plan(["probabilities"]) == app.plan(["probabilities"])


def test_another_checkpoint_is_another_session_and_writes_its_own_weights(tmp_path):
    model, first = _example(tmp_path, seed=0)
    _, second = _example(tmp_path, seed=1)
    written = []
    for ckpt in (first, second):
        session = open_session(model, [ckpt])
        session.selection(["logits"])  # kept in that session only
        out = tmp_path / f"{ckpt.name}.onnx"
        export_selection(session.selections, ["logits"], out)
        written.append({t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer})
    assert (written[0]["fc1.bias"] != written[1]["fc1.bias"]).any()
