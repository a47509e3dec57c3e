"""Deploy targets: the ORT release table and the target names the CLI takes."""

from __future__ import annotations

import pytest

from onnxport.core.deploy.targets import ORT_RELEASES, parse_target
from onnxport.core.util.errors import OnnxportError


@pytest.mark.parametrize(("name", "opset", "ir"), [("ort-1.14", 18, 8), ("ort-1.15", 19, 8), ("ort-1.16", 19, 9),
                                                   ("ort-1.17", 20, 9), ("ort-1.18", 21, 10), ("ort-1.19", 21, 10),
                                                   ("ort-1.20", 21, 10), ("ort-1.21", 22, 10), ("ort-1.22", 22, 11),
                                                   ("ORT-1.17.3", 20, 9)])
def test_release_limits(name, opset, ir):
    target = parse_target(name)
    assert (target.max_opset, target.max_ir, target.mobile) == (opset, ir, False)
    assert f"opset <= {opset}" in target.needs() and target.suffix == ".onnx"


def test_table_never_goes_back():
    rows = [ORT_RELEASES[k] for k in sorted(ORT_RELEASES)]
    for before, after in zip(rows, rows[1:]):
        assert all(a >= b for a, b in zip(after[1:], before[1:]))


def test_mobile():
    target = parse_target("ort-mobile")
    assert target.mobile and target.suffix == ".ort" and "required_operators_and_types.config" in target.needs()


@pytest.mark.parametrize("name", ["ort-1.99", "ort-mobile2", "tensorrt", "ort-1", ""])
def test_unknown_target_is_one_line(name):
    with pytest.raises(OnnxportError) as err:
        parse_target(name)
    assert "\n" not in str(err.value) and "ort-1.17" in str(err.value)
