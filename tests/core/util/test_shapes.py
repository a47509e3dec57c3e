"""value_info_shape: the one reader of a ValueInfo's declared shape (fixed, symbolic, unknown, none)."""

from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.util.shapes import value_info_shape


def test_fixed_symbolic_and_unknown_dims():
    vi = helper.make_tensor_value_info("x", T.FLOAT, [2, "batch", None])
    assert value_info_shape(vi) == (2, "batch", None)
    assert all(type(d) is int for d in value_info_shape(helper.make_tensor_value_info("y", T.FLOAT, [3, 0])))


def test_scalar_is_rank_zero_and_no_shape_is_none():
    assert value_info_shape(helper.make_tensor_value_info("s", T.FLOAT, [])) == ()
    assert value_info_shape(helper.make_tensor_value_info("u", T.FLOAT, None)) is None
    assert value_info_shape(onnx.ValueInfoProto(name="bare")) is None
    seq = helper.make_tensor_sequence_value_info("q", T.FLOAT, [2])
    assert value_info_shape(seq) is None  # not a tensor
