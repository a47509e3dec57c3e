"""Merging parameter sets (pipeline stages) and exporting from the merge."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnxport.core.export.export import export_model
from onnxport.core.io.parameter_set import merge_parameter_sets
from onnxport.core.util.errors import CheckpointMismatchError

from ..model_builders import eval_like_mlp, mlp_weights, param_set


def test_disjoint_stages_merge_and_export(tmp_path):
    w = mlp_weights()
    stage0 = param_set({k: v for k, v in w.items() if k.startswith("fc1")}, source="stage0")
    stage1 = param_set({k: v for k, v in w.items() if k.startswith("fc2")}, source="stage1")
    merged = merge_parameter_sets([stage0, stage1])
    assert sorted(merged) == sorted(w) and merged.nbytes == sum(a.nbytes for a in w.values())
    src = tmp_path / "eval.onnx"
    onnx.save(eval_like_mlp(), src)
    export_model(src, tmp_path / "out.onnx", ["logits"], merged)


def test_same_name_same_values_is_fine_different_values_is_an_error():
    w = mlp_weights()
    a = param_set({"fc1.weight": w["fc1.weight"]}, source="a.ckpt")
    same = param_set({"fc1.weight": w["fc1.weight"].copy()}, source="b.ckpt")
    assert len(merge_parameter_sets([a, same])) == 1
    other = param_set({"fc1.weight": w["fc1.weight"] + 1}, source="c.ckpt")
    with pytest.raises(CheckpointMismatchError, match=r"fc1\.weight.*a\.ckpt.*c\.ckpt"):
        merge_parameter_sets([a, other])
    reshaped = param_set({"fc1.weight": np.zeros((2, 2), np.float32)}, source="d.ckpt")
    with pytest.raises(CheckpointMismatchError, match="types/shapes"):
        merge_parameter_sets([a, reshaped])
