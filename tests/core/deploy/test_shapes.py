"""Fixed shapes (`--shape`, `--dim`) and the reverse, with one-line refusals for what does not fit."""

from __future__ import annotations

import pytest

from onnxport.core.deploy.shapes import apply_shapes, parse_shape_options
from onnxport.core.util.errors import OnnxportError

from .deploy_models import conv_model


def dims(vi):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def test_shape_fixes_input_and_output_is_inferred():
    model, notes = apply_shapes(conv_model(), parse_shape_options(["x=1x3x32x48"]))
    assert dims(model.graph.input[0]) == [1, 3, 32, 48]
    assert dims(model.graph.output[0]) == [1, 4]  # shapes inferred again
    assert "input x fixed to 1x3x32x48" in notes


def test_dim_by_name_and_by_axis():
    model, _ = apply_shapes(conv_model(), parse_shape_options([], ["batch=1", "x:2=16", "w=24"]))
    assert dims(model.graph.input[0]) == [1, 3, 16, 24]


def test_unnamed_question_marks_are_separate_sizes():
    model = conv_model()
    for d in model.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.dim_param = "?"
    fixed, _ = apply_shapes(model, parse_shape_options(["x=1x3x8x12"]))
    assert dims(fixed.graph.input[0]) == [1, 3, 8, 12]


def test_batch_made_dynamic():
    model, notes = apply_shapes(conv_model(batch=1), parse_shape_options([], ["batch=dynamic"]))
    assert dims(model.graph.input[0])[0] == "batch" and dims(model.graph.output[0])[0] == "batch"
    assert "batch made dynamic (x axis 0)" in notes


@pytest.mark.parametrize(("shapes", "dims_", "words"), [
    (["x=1x4x8x8"], [], "has 3 on axis 1"),
    (["x=1x3x8"], [], "has rank 4, not 3"),
    (["y=1x3x8x8"], [], "has no input 'y'"),
    ([], ["seq=8"], "no input dimension is named 'seq'"),
    ([], ["x:7=2"], "has no axis 7"),
    (["x=1x0x8x8"], [], "positive sizes"),
    ([], ["batch=-1"], "NAME=SIZE or NAME=dynamic"),
])
def test_what_does_not_fit_is_one_line(shapes, dims_, words):
    with pytest.raises(OnnxportError) as err:
        apply_shapes(conv_model(), parse_shape_options(shapes, dims_))
    assert words in str(err.value) and "\n" not in str(err.value)
