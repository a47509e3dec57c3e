"""The export plan predicts the written model: node count after eval-mode and folding, and its
size (issue 15, cut 7: the app said "6 nodes kept, 1.5 KB" for a written 4 nodes, 2.3 KB)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export import export as export_module
from onnxport.core.export.export import export_model, plan_export
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken
from onnxport.core.workflow.sources import open_sources
from onnxport.resources import example_files

from ..model_builders import eval_like_mlp, make_model, mlp_weights, param_set

PAGE = 4096  # the writer may pad a tensor over 1 MiB to its source's page offset


def plan_and_write(model_path, params, outputs, out_path, index=None):
    model = onnx.load(model_path, load_external_data=False)
    plan = plan_export(SelectionGraphs(model, model_path, params, index.table if index else None), index, outputs)
    result = export_model(model_path, out_path, outputs, params)
    written = onnx.load(out_path)
    assert plan.exact
    assert plan.kept_nodes == len(written.graph.node) == result.nodes
    assert plan.folded_nodes == result.folded
    return plan, out_path.stat().st_size


def test_plan_matches_the_written_example(tmp_path):
    """The bundled example (resources/): Dropout bypassed, 4 nodes written, size to the byte."""
    loaded = open_sources(list(example_files()))
    for outputs in (["probabilities"], ["onnx::loss::2"]):
        plan, size = plan_and_write(loaded.model_path, loaded.params, outputs, tmp_path / "m.onnx", loaded.index)
        assert plan.eval_mode_changes >= 1
        assert plan.estimated_bytes == size


def test_plan_counts_folds_and_eval_mode_on_a_crafted_model(tmp_path):
    """Transposes of weights folded, Dropout bypassed: 9 pruned nodes, 5 written."""
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    plan, size = plan_and_write(path, param_set(mlp_weights()), ["probabilities"], tmp_path / "m.onnx")
    assert plan.folded_nodes == 2 and plan.eval_mode_changes == 1 and plan.kept_nodes == 6
    assert plan.estimated_bytes == size


def test_plan_of_constant_chains_and_big_weights(tmp_path):
    """A Constant shape -> Reshape of a 2 MB weight, a Cast and a Mul of constants (folded), a
    BatchNormalization, a Dropout making the graph output (put in inference form): nodes exact, size within a page."""
    w = np.arange(512 * 1024, dtype=np.float32).reshape(1024, 512)
    nodes = [
        helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(np.array([512, 1024], np.int64))),
        helper.make_node("Reshape", ["w", "shape"], ["w2"]),
        helper.make_node("Cast", ["scale_i"], ["scale"], to=T.FLOAT),
        helper.make_node("Mul", ["w2", "scale"], ["w3"]),
        helper.make_node("MatMul", ["x", "w3"], ["y"]),
        helper.make_node("BatchNormalization", ["y", "g", "b", "m", "v"], ["z"], training_mode=0),
        helper.make_node("Dropout", ["z"], ["out"]),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(2, np.int32), "scale_i")]
    inits += [numpy_helper.from_array(np.ones(1024, np.float32) * k, n) for k, n in enumerate("gbmv")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 512])],
                       [helper.make_tensor_value_info("out", T.FLOAT, [2, 1024])], inits)
    path = tmp_path / "forward.onnx"
    onnx.save(model, path, save_as_external_data=True, location="forward.data")  # weights as spans
    plan, size = plan_and_write(path, None, ["out"], tmp_path / "m.onnx")
    assert plan.folded_nodes == 3 and plan.kept_nodes == 3  # MatMul, BatchNormalization, the output's Dropout
    assert plan.eval_mode_changes == 1
    assert 0 <= size - plan.estimated_bytes <= PAGE


def test_plan_is_cancellable_and_bounded(tmp_path, monkeypatch):
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    model, params = onnx.load(path), param_set(mlp_weights())
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        plan_export(SelectionGraphs(model, path, params), None, ["probabilities"], token)
    # above the bound the passes are skipped and the plan says it is an estimate
    monkeypatch.setattr(export_module, "PLAN_EXACT_MAX_NODES", 5)
    plan = plan_export(SelectionGraphs(model, path, params), None, ["probabilities"])
    assert not plan.exact and plan.kept_nodes == 9 and plan.folded_nodes == 0
    assert plan.estimated_bytes == sum(v.nbytes for v in mlp_weights().values())
