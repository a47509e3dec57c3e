"""Model-local functions that call themselves are refused on load (issue 27, item 12)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnxport.core.export.export import export_model
from onnxport.core.io.model_functions import check_function_calls
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.errors import CorruptFileError

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]


def function(name: str, body: list[onnx.NodeProto]) -> onnx.FunctionProto:
    return helper.make_function("local", name, ["a"], ["b"], body, OPSETS)


def call(name: str, src: str = "a", dst: str = "b") -> onnx.NodeProto:
    return helper.make_node(name, [src], [dst], domain="local")


def model_with(functions: list[onnx.FunctionProto], entry: str = "F") -> onnx.ModelProto:
    graph = helper.make_graph([call(entry, "x", "y")], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=8, functions=functions)


def _in_if_body(name: str) -> list[onnx.NodeProto]:
    branch = helper.make_graph([call(name, "a", "r")], "then", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["a"], ["r2"])], "else", [],
                              [helper.make_tensor_value_info("r2", TensorProto.FLOAT, [2])])
    return [helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("Constant", [], ["zero"], value_float=0.0),
            helper.make_node("If", ["c"], ["b"], then_branch=branch, else_branch=other)]


RECURSIVE = {
    "calls itself": [function("F", [call("F")])],
    "through another": [function("F", [call("G")]), function("G", [call("H")]), function("H", [call("F")])],
    "from an If body": [function("F", _in_if_body("F"))],
}


@pytest.mark.parametrize("case", list(RECURSIVE))
def test_recursive_functions_are_refused_on_load_and_never_exported(tmp_path, case):
    path = tmp_path / "rec.onnx"
    onnx.save(model_with(RECURSIVE[case]), path)
    with pytest.raises(CorruptFileError, match="model-local function 'local:.' calls itself") as info:
        load_graph(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(CorruptFileError, match="calls itself"):
        export_model(path, tmp_path / "out.onnx", ["y"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.onnx"]


def test_functions_calling_others_many_times_still_export_and_run(tmp_path):
    twice = [helper.make_node("G", ["a"], ["t"], domain="local"), helper.make_node("G", ["t"], ["b"], domain="local")]
    functions = [function("F", twice), function("G", [helper.make_node("Relu", ["a"], ["b"])])]
    path = tmp_path / "ok.onnx"
    onnx.save(model_with(functions), path)
    out = tmp_path / "out.onnx"
    export_model(path, out, ["y"])
    x = np.array([-1.0, 2.0], np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, [0.0, 2.0])


def test_a_long_chain_of_functions_is_checked_without_recursion():
    chain = [function(f"F{i}", [call(f"F{i + 1}")]) for i in range(20_000)]
    chain.append(function("F20000", [helper.make_node("Identity", ["a"], ["b"])]))
    check_function_calls(model_with(chain, "F0"))
    chain[-1] = function("F20000", [call("F0")])
    with pytest.raises(CorruptFileError, match=r"local:F0 -> local:F1 -> .* \.\.\."):
        check_function_calls(model_with(chain, "F0"))
