"""Sizes a model or an option declares for generated inputs: checked as Python ints, per input and in
all, before anything is allocated (issue 36, family 2: int64 products wrapped to 0, eight 1 GiB
inputs made 8 GiB, `--dim batch=²` passed `isdigit()`)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.cli import main
from onnxport.core.cli.input_options import parse_dims, parse_shapes
from onnxport.core.deploy.shapes import parse_shape_options
from onnxport.core.evaluate.feeds import generate_feeds, input_specs
from onnxport.core.evaluate.input_shapes import parse_size, parse_sizes
from onnxport.core.evaluate.input_values import check_generated_size
from onnxport.core.util.budgets import GENERATED_INPUT_MAX, GENERATED_TOTAL_MAX, MiB, declared_bytes
from onnxport.core.util.errors import OnnxportError


def identities(shapes: list, elem=T.FLOAT) -> onnx.ModelProto:
    ins = [helper.make_tensor_value_info(f"x{i}", elem, s) for i, s in enumerate(shapes)]
    outs = [helper.make_tensor_value_info(f"y{i}", elem, s) for i, s in enumerate(shapes)]
    nodes = [helper.make_node("Identity", [f"x{i}"], [f"y{i}"]) for i in range(len(shapes))]
    return helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", 17)])


def one_line_exit_2(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_sizes_multiply_exactly_where_int64_wraps():
    assert declared_bytes([1 << 32, 1 << 32], 4) == 1 << 66  # int64: 0
    specs = input_specs(identities([[1 << 32, 1 << 32]]))
    with pytest.raises(OnnxportError, match=r"x0.*too large to generate"):
        generate_feeds(specs, 1)


def test_many_inputs_under_the_per_input_limit_are_refused_in_all():
    specs = input_specs(identities([[GENERATED_INPUT_MAX // 4]] * 8))  # eight 1 GiB inputs, 300 bytes of model
    with pytest.raises(OnnxportError, match=r"8\.0 GiB per feed.*at most 2\.0 GiB in all"):
        generate_feeds(specs, 1)


def test_the_total_counts_every_feed_of_a_request():
    specs = input_specs(identities([[256 * MiB // 4]]))  # 256 MiB per feed
    shapes = {"x0": (256 * MiB // 4,)}
    check_generated_size(specs, shapes, GENERATED_TOTAL_MAX // (256 * MiB))  # just within
    with pytest.raises(OnnxportError, match="too large to generate"):
        check_generated_size(specs, shapes, GENERATED_TOTAL_MAX // (256 * MiB) + 1)


def test_option_sizes_are_ascii_whole_numbers_within_int64():
    assert parse_size("128") == 128 and parse_sizes("1x3x48x320") == (1, 3, 48, 320)
    for bad in ("²", "٣", "2^80", str(1 << 80), str(1 << 63), "0", "-1", "1e3", ""):
        assert parse_size(bad) is None, bad
    assert parse_sizes(f"1x{1 << 63}") is None and parse_sizes("1x٣") is None
    for bad in ("batch=²", "batch=2^80", f"batch={1 << 80}", "batch=0"):
        with pytest.raises(OnnxportError, match="--dim expects"):
            parse_dims([bad])
        with pytest.raises(OnnxportError, match="--dim expects"):
            parse_shape_options([], [bad])
    for bad in ("x=4294967296x٣", f"x={1 << 64}x1"):
        with pytest.raises(OnnxportError, match="--shape expects"):
            parse_shapes([bad])
        with pytest.raises(OnnxportError, match="--shape expects"):
            parse_shape_options([bad])
    assert parse_shape_options([f"x={(1 << 63) - 1}x1"], ["batch=dynamic"]).dims == {"batch": "dynamic"}


@pytest.mark.parametrize("args", [
    [],  # the model declares 2^32 x 2^32
    ["--dim", "batch=²"],
    ["--dim", f"batch={1 << 80}"],
])
def test_bench_and_validate_refuse_in_one_line(tmp_path, capsys, args):
    declared = tmp_path / "big.onnx"
    onnx.save(identities([[1 << 32, 1 << 32]]), declared)
    dynamic = tmp_path / "dyn.onnx"
    onnx.save(identities([["batch", 4]]), dynamic)
    model = str(dynamic if args else declared)
    one_line_exit_2(capsys, "bench", model, *args)
    one_line_exit_2(capsys, "validate", model, "--reference", model, *args)


def test_shape_option_past_the_budget_is_one_line(tmp_path, capsys):
    dynamic = tmp_path / "dyn.onnx"
    onnx.save(identities([["batch", "n"]]), dynamic)
    err = one_line_exit_2(capsys, "bench", str(dynamic), "--shape", "x0=4294967296x4294967296")
    assert "too large to generate" in err
    err = one_line_exit_2(capsys, "deploy", str(dynamic), "--target", "ort-1.17", "-o", str(tmp_path / "o.onnx"),
                          "--shape", f"x0={(1 << 63) - 1}x4")
    assert "too large to generate" in err and not (tmp_path / "o.onnx").exists()


def test_a_shape_holding_no_bytes_that_numpy_cannot_hold_is_refused():
    """[0, 2^62] declares no bytes, so no budget stops it; numpy refuses it anyway (found by
    tests/core/cli/test_fuzz_options.py)."""
    specs = input_specs(identities([[0, 1 << 62]]))
    with pytest.raises(OnnxportError, match="too big for any array"):
        check_generated_size(specs, {"x0": (0, 1 << 62)})
    check_generated_size(specs, {"x0": (0, 1 << 20)})  # an empty array numpy holds


@pytest.mark.parametrize(("option", "value"), [("--batch", "-3"), ("--batch", "0"), ("--batch", "²"),
                                                ("--threads", str(1 << 66)), ("--threads", "-1")])
def test_bench_counts_are_bounded_whole_numbers(tmp_path, capsys, option, value):
    model = tmp_path / "dyn.onnx"
    onnx.save(identities([["batch", 4]]), model)
    with pytest.raises(SystemExit) as exit_:
        main(["bench", str(model), option, value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"argument {option}: a whole number from 1 to" in err and "Traceback" not in err


def test_negative_sizes_and_batches_are_refused_before_generating():
    from onnxport.core.evaluate.input_shapes import ShapePlan

    specs = input_specs(identities([["batch", 4]]))
    with pytest.raises(OnnxportError, match="has a negative size"):
        check_generated_size(specs, {"x0": (-3, 4)})
    for batch in (0, -3):
        with pytest.raises(OnnxportError, match=f"a batch of {batch} samples"):
            ShapePlan(specs, batch=batch)
