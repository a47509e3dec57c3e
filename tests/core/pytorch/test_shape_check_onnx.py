"""shape_check on hand-built models (no torch): a Reshape that fixes the batch is named with its
constant shape; outputs that differ from the reference's are refused; a model that takes its
axes passes with its max difference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.pytorch.shape_check import BakedAxesError, ExampleShapeError, check_export, declared_axes
from onnxport.core.util.errors import OnnxportError


def model(path, shape: list[int]) -> None:
    """y = Reshape(x, shape) * 2 with x declared [batch, 4]."""
    nodes = [helper.make_node("Constant", [], ["s"], name="c", value=helper.make_tensor("v", T.INT64, [2], shape)),
             helper.make_node("Reshape", ["x", "s"], ["r"], name="flat"),
             helper.make_node("Add", ["r", "r"], ["y"], name="double")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def feeds_at(sizes):
    return {"x": np.arange(sizes["batch"] * 4, dtype=np.float32).reshape(sizes["batch"], 4)}


def doubled(sizes):
    return [2 * feeds_at(sizes)["x"]]


def test_a_reshape_that_fixes_the_batch_is_named(tmp_path):
    path = tmp_path / "m.onnx"
    model(path, [2, 4])
    assert declared_axes(onnx.load(path)) == {"batch": [("x", 0)]}
    with pytest.raises(BakedAxesError) as info:
        check_export(path, {"batch": 2}, feeds_at, doubled)
    line = info.value.one_line()
    assert "runs only at batch = 2" in line and "Reshape 'flat' (a fixed target shape [2, 4])" in line
    assert info.value.baked == ["batch"]


def test_outputs_that_differ_from_the_reference_are_refused(tmp_path):
    path = tmp_path / "m.onnx"
    model(path, [-1, 4])
    assert check_export(path, {"batch": 2}, feeds_at, doubled) == 0.0
    with pytest.raises(OnnxportError, match="differs from PyTorch's"):
        check_export(path, {"batch": 2}, feeds_at, lambda sizes: [d + 0.5 for d in doubled(sizes)])
    with pytest.raises(OnnxportError, match=r"at batch = 2: output 0 has shape \[2, 4\] where PyTorch gives \[2, 2, 2\]"):
        check_export(path, {"batch": 2}, feeds_at, lambda sizes: [doubled(sizes)[0].reshape(sizes["batch"], 2, 2)])
    assert check_export(path, {"batch": 2}, feeds_at, lambda sizes: [d + 0.5 for d in doubled(sizes)],
                        compare=False) is None  # shapes only


def test_a_model_that_fails_at_the_example_shape(tmp_path):
    path = tmp_path / "m.onnx"
    model(path, [3, 4])
    with pytest.raises(ExampleShapeError, match="at the example shape"):
        check_export(path, {"batch": 2}, feeds_at, None)


def test_an_axis_is_checked_at_a_size_the_reference_takes(tmp_path):
    path = tmp_path / "m.onnx"
    model(path, [2, 4])

    def even_only(sizes):
        return doubled(sizes) if sizes["batch"] % 2 == 0 else None

    with pytest.raises(BakedAxesError, match="runs only at batch = 2"):  # checked at batch = 4
        check_export(path, {"batch": 2}, feeds_at, even_only)
    assert check_export(path, {"batch": 2}, feeds_at, lambda sizes: doubled(sizes) if sizes["batch"] == 2 else None) \
        == 0.0  # the reference takes no other size: nothing to hold the axis to
