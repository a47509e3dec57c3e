"""Every deploy artifact checked against the opset it declares, node by node, before anything is
written (issue 36, family 3: `deploy --target ort-1.14` wrote a model declaring opset 18 that holds
`Pad mode=wrap`, checked only with the installed ORT; a node of domain `ai.onnx` ended in
onnx's InferenceError traceback)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import defs, helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.deploy.deploy import deploy
from onnxport.core.deploy.target_check import node_problem, target_problem
from onnxport.core.deploy.targets import parse_target
from onnxport.core.deploy.versions import fit_versions
from onnxport.core.util.errors import OnnxportError


def pad_model(opset: int, mode: str = "wrap", domain: str = "") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1, 6])
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode, name="the_pad", domain=domain)
    imports = [helper.make_opsetid(domain, opset)]
    return helper.make_model(helper.make_graph([node], "g", [x], [y], [pads]), opset_imports=imports)


def one_node(op: str, opset: int, inputs=("x",), outputs=("y",), **attrs) -> str | None:
    return node_problem(helper.make_node(op, list(inputs), list(outputs), name="n", **attrs), {"": opset})


@pytest.mark.parametrize(("op", "attr", "value", "before", "since", "inputs"), [
    ("Pad", "mode", "wrap", 18, 19, ("x", "pads")),
    ("ScatterElements", "reduction", "max", 16, 18, ("x", "i", "u")),
    ("ScatterND", "reduction", "min", 16, 18, ("x", "i", "u")),
    ("Resize", "coordinate_transformation_mode", "half_pixel_symmetric", 18, 19, ("x", "", "s")),
    ("GridSample", "mode", "linear", 16, 20, ("x", "grid")),
])
def test_attribute_values_are_checked_at_the_declared_opset(op, attr, value, before, since, inputs):
    refused = one_node(op, before, inputs, **{attr: value})
    assert refused is not None and f"does not admit {attr}='{value}' (it does from opset {since})" in refused
    assert f"{op}-" in refused and "node 'n'" in refused
    assert one_node(op, since, inputs, **{attr: value}) is None


def test_names_counts_and_deprecated_ops_are_checked():
    assert "no such op at ai.onnx opset 18" in one_node("Gelu", 18)
    assert "has no attribute 'approximate'" in one_node("Relu", 18, approximate="tanh")
    assert "needs attribute 'to'" in one_node("Cast", 18)
    assert "takes attribute 'axis' as INT, not STRING" in one_node("Softmax", 18, axis="x")
    assert "takes 2-2 inputs, not 3" in one_node("Add", 18, ("a", "b", "c"))
    assert "deprecated at ai.onnx opset 10" in one_node("Upsample", 10, ("x", "s"))
    assert one_node("Resize", 13, ("x", "", "s")) is None  # an optional input left out in the middle


def test_every_schema_admits_its_own_defaults():
    """The value rule never refuses what the schema itself gives as the default."""
    for schema in defs.get_all_schemas_with_history():
        if schema.domain not in ("", "ai.onnx.ml") or schema.deprecated:
            continue
        for name, spec in schema.attributes.items():
            if spec.type == defs.OpSchema.AttrType.STRING and spec.default_value.s:
                node = helper.make_node(schema.name, ["x"] * schema.min_input, ["y"] * max(schema.min_output, 1),
                                        **{name: spec.default_value.s.decode()})
                why = node_problem(node, {schema.domain: schema.since_version})
                assert why is None or "admit" not in why, why


def test_subgraphs_and_local_functions_are_checked():
    then = helper.make_graph([helper.make_node("Pad", ["x", "pads"], ["t"], mode="wrap", name="inner")], "then", [],
                             [helper.make_tensor_value_info("t", T.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", T.FLOAT, None)])
    model = pad_model(18, "constant")
    model.graph.node.append(helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other))
    assert "node 'inner' (Pad)" in target_problem(model)
    function = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Pad", ["a", "p"], ["b"], mode="wrap")],
                                    [helper.make_opsetid("", 18)])
    model = pad_model(18, "constant")
    model.functions.append(function)
    assert "in function 'f'" in target_problem(model)


@pytest.mark.parametrize("opset", [18, 19])  # kept as declared; converted down by onnx.version_converter
def test_deploy_refuses_before_writing(tmp_path, capsys, opset):
    source = tmp_path / "pad.onnx"
    onnx.save(pad_model(opset), source)
    out = tmp_path / "out.onnx"
    assert main(["deploy", str(source), "--target", "ort-1.14", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "node 'the_pad' (Pad): Pad-18" in err and "mode='wrap'" in err and "ONNX Runtime 1.14" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pad.onnx"]
    if opset == 19:  # a release that reads Pad-19 takes it
        assert deploy(source, "ort-1.17", tmp_path / "ok.onnx").check.passed


def test_domain_ai_onnx_is_the_default_domain(tmp_path):
    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 19)])
    onnx.save(model, tmp_path / "m.onnx")
    result = deploy(tmp_path / "m.onnx", "ort-1.14", tmp_path / "out.onnx")
    assert "1 node(s) of domain 'ai.onnx' moved to the default domain ''" in result.converted and result.check.passed
    written = onnx.load(tmp_path / "out.onnx")
    assert [n.domain for n in written.graph.node] == [""] and [(o.domain, o.version) for o in written.opset_import] == [("", 18)]
    model.opset_import.append(helper.make_opsetid("ai.onnx", 17))
    with pytest.raises(OnnxportError, match="ai.onnx opset 17 and opset 19 for the default domain"):
        fit_versions(model, parse_target("ort-1.14"))
