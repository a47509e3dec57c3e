"""Staging (export.staging): tool output committed as one unit, or nothing at all.

A tool writes a model and its external data in the staging folder under names of its choosing;
`commit` renames the data files to names unique to the run, points the model at them, moves them in
before the model, and removes the data file the previous model named. A failure or cancel before
the commit point leaves the destination folder exactly as it was.
"""

from __future__ import annotations

import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.staging import Staging
from onnxport.core.util.data_files import data_location, external_tensors
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, Reporter

W = np.arange(600, dtype=np.float32).reshape(20, 30)  # over onnx's external-data size threshold


def model_with(weight: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 20])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 30])],
                              [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tool_writes(stage: Staging, weight: np.ndarray, location: str) -> os.PathLike:
    """What a tool does in the staging folder: the final model name, external data as it likes."""
    staged = stage.path(stage.out_path.name)
    onnx.save_model(model_with(weight), str(staged), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=location, size_threshold=0)
    return staged


def locations(path) -> list[str]:
    return [data_location(t) for t in external_tensors(onnx.load(path, load_external_data=False).graph)]


def snapshot(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def commit_one(out, weight, location="tool.data", report=None):
    with Staging(out) as stage:
        staged = tool_writes(stage, weight, location)
        unique = stage.data_name
        stage.commit(staged, report)
    return unique


def test_commit_renames_the_data_file_to_the_runs_unique_name(tmp_path):
    out = tmp_path / "m.onnx"
    with Staging(out) as stage:
        staged = tool_writes(stage, W, "tool.data")
        unique = stage.data_name
        written = stage.commit(staged)
    assert re.fullmatch(r"m\.onnx\.[0-9a-f]{8}\.data", unique)
    assert written == [tmp_path / unique, out]
    assert sorted(os.listdir(tmp_path)) == sorted(["m.onnx", unique])  # no tool.data, no temp folder
    assert locations(out) == [unique]
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(out).graph.initializer[0]), W)


def test_several_data_files_each_get_a_unique_name(tmp_path):
    out = tmp_path / "m.onnx"
    with Staging(out) as stage:
        staged = stage.path("m.onnx")
        model = model_with(W)
        model.graph.initializer.append(numpy_helper.from_array(W + 1, "w2"))
        onnx.save_model(model, str(staged), save_as_external_data=True, all_tensors_to_one_file=False,
                        size_threshold=0)  # one file per tensor, named after it
        run = stage.data_name.split(".")[-2]  # m.onnx.<run id>.data
        stage.commit(staged)
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(["m.onnx", f"m.onnx.{run}.0.data", f"m.onnx.{run}.1.data"])
    assert sorted(locations(out)) == names[1:]
    loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
    np.testing.assert_array_equal(loaded["w"], W)
    np.testing.assert_array_equal(loaded["w2"], W + 1)


def test_the_previous_models_data_file_is_removed_and_others_are_not(tmp_path):
    out = tmp_path / "m.onnx"
    first = commit_one(out, W)
    (tmp_path / "m.onnx.shared.data").write_bytes(b"not ours")  # no run id: not onnxport's to delete
    second = commit_one(out, W * 2)
    assert first != second
    assert sorted(os.listdir(tmp_path)) == sorted(["m.onnx", second, "m.onnx.shared.data"])
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(out).graph.initializer[0]), W * 2)


def test_a_failure_before_the_commit_leaves_nothing(tmp_path):
    out = tmp_path / "m.onnx"
    commit_one(out, W)
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError, match="the tool failed"), Staging(out) as stage:
        tool_writes(stage, W * 3, "tool.data")
        assert len(os.listdir(tmp_path)) == len(before) + 1  # the staging folder, hidden
        raise RuntimeError("the tool failed")
    assert snapshot(tmp_path) == before


def test_a_failing_commit_leaves_the_old_output_untouched(tmp_path):
    out = tmp_path / "m.onnx"
    commit_one(out, W)
    before = snapshot(tmp_path)
    with pytest.raises(OnnxportError, match="tensor 'w': external data file 'tool.data' not found"), \
            Staging(out) as stage:
        staged = tool_writes(stage, W * 3, "tool.data")
        os.remove(stage.path("tool.data"))  # the model names a data file that is not there
        stage.commit(staged)
    assert snapshot(tmp_path) == before


def test_cancel_at_the_commit_point_writes_nothing(tmp_path):
    out = tmp_path / "m.onnx"
    commit_one(out, W)
    before = snapshot(tmp_path)
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        commit_one(out, W * 3, report=Reporter(cancel=token))
    assert snapshot(tmp_path) == before
    assert not token.committed
