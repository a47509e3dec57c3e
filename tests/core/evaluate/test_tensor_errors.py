"""The error map (evaluate.tensor_errors): every shared tensor compared, the jump named, bounded JSON.

The reference is a float MLP of three MatMul layers; the candidate keeps every tensor name, the first
layer's weight exact, the second one noisy (5%) and the third slightly off: the error must be 0 up to
h1/a1, jump at h2 (made by mm2), and the later nodes add little of their own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.report import accuracy_map, build_report, keepable_nodes, summary_lines
from onnxport.core.evaluate.tensor_errors import JUMP, NODE_LIMIT, tensor_errors
from onnxport.core.evaluate.validate import validate
from onnxport.core.quantize.quantize import QuantizeOptions, quantize

from ..quant_models import outlier_mlp, save
from .test_sensitivity import FEED, WEIGHTS, mlp, perturbed


def test_every_shared_tensor_is_compared_and_the_jump_is_named():
    reference = mlp(WEIGHTS)
    candidate = mlp(perturbed({"w1": 0.0, "w2": 0.05, "w3": 1e-3}))
    errors = tensor_errors(candidate, reference, FEED)
    assert list(errors.tensors) == ["h1", "a1", "h2", "a2", "y"]
    assert errors.tensors["h1"][0] == 0.0 and errors.tensors["a1"] == (0.0, 1.0)
    assert errors.tensors["h2"][0] > JUMP
    assert [e.node for e in errors.nodes] == ["mm1", "relu1", "mm2", "relu2", "mm3"]  # topological order
    assert errors.first_jump is not None and errors.first_jump.node == "mm2" and errors.first_jump.tensor == "h2"
    assert errors.node("relu2").added < errors.node("mm2").added / 5
    assert "h2" in errors.jump_line() and "mm2" in errors.jump_line()
    data = errors.to_dict()
    assert data["first_jump"]["tensor"] == "h2" and data["tensors_compared"] == 5 and data["nodes_compared"] == 5
    assert "mm1" not in {n["node"] for n in data["nodes"]}  # adds nothing: no per-node figures
    assert data["worst_tensors"][0]["tensor"] in ("a2", "y", "h2") and data["worst_tensors"][0]["node"]
    json.dumps(data)


def test_no_jump_when_every_node_adds_little():
    reference = mlp(WEIGHTS)
    errors = tensor_errors(mlp(perturbed({"w1": 1e-4, "w2": 1e-4, "w3": 1e-4})), reference, FEED)
    assert errors.first_jump is None and "never jumps" in errors.jump_line()
    assert errors.to_dict()["first_jump"] is None


def test_a_node_that_turns_values_non_finite_is_the_jump():
    reference = mlp(WEIGHTS)
    broken = perturbed({"w1": 0.0, "w2": 0.0, "w3": 0.0})
    broken["w2"] = np.full_like(broken["w2"], np.inf)
    errors = tensor_errors(mlp(broken), reference, FEED)
    assert errors.first_jump.node == "mm2" and errors.first_jump.nonfinite
    data = errors.to_dict()
    assert data["first_jump"]["rel_error"] is None  # JSON-safe: no inf
    assert not any(isinstance(v, float) and not math.isfinite(v) for n in data["nodes"] for v in n.values())


def test_the_report_carries_the_map_of_a_real_quantization(tmp_path):
    fp32 = Path(save(outlier_mlp(), tmp_path / "mlp.onnx"))
    q = quantize(fp32, tmp_path / "mlp.int8.onnx", "dynamic", QuantizeOptions(int8_path="avx2"))
    report = build_report(export={"path": str(fp32)}, quantize=q)
    found = accuracy_map(report)
    assert found is not None and found["tensors_compared"] >= 3
    graph_nodes = {n.name for n in onnx.load(fp32).graph.node}
    assert found["nodes"] and {n["node"] for n in found["nodes"]} <= graph_nodes
    assert len(found["nodes"]) <= NODE_LIMIT and all("tensor" in n and "added" in n for n in found["nodes"])
    text = "\n".join(summary_lines(report))
    assert "the error jumps first" in text or "never jumps" in text
    assert accuracy_map(build_report(validation=validate(fp32, fp32))) is None  # float vs float: no map


def test_a_ranked_node_stands_for_its_fused_group():
    report = {"quantize": {"validation": {"layers": [{"node": "fc1/Add", "group": ["fc1/MatMul"]},
                                                     {"node": "fc2/MatMul", "group": ["fc2/MatMul", "fc2/Relu"]}]}}}
    assert keepable_nodes(report, ["fc1/Add", "other"]) == ["fc1/MatMul", "other"]
    assert keepable_nodes(report, ["fc2/MatMul", "fc1/Add"]) == ["fc2/MatMul", "fc2/Relu", "fc1/MatMul"]
    assert keepable_nodes(None, ["x"]) == ["x"]


def test_an_activation_fused_away_is_never_the_jump():
    """QDQ drops a Relu after a MatMul (the quantization clamps) and the MatMul writes the Relu's
    tensor: that tensor now holds pre-activation values, which is no error of the Relu's."""
    reference = mlp(WEIGHTS)
    fused = mlp(WEIGHTS)
    del fused.graph.node[1]  # relu1 gone: mm1 writes a1 (before the clamp), a Relu stands for the QDQ pair
    fused.graph.node[0].output[0] = "a1"
    fused.graph.node.insert(1, onnx.helper.make_node("Relu", ["a1"], ["a1_dq"], name="a1_DequantizeLinear"))
    fused.graph.node[2].input[0] = "a1_dq"
    errors = tensor_errors(fused, reference, FEED)
    assert "a1" not in errors.tensors and "relu1" not in {e.node for e in errors.nodes}
    assert errors.first_jump is None  # the same arithmetic: nothing jumps


def test_integer_shape_nodes_the_model_keeps_are_no_part_of_a_fused_group():
    """A Reshape's target shape comes from Shape -> Gather -> Concat (integers, untouched by the
    quantizer): the quantized MatMul's group is the MatMul, never that shape arithmetic."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    def model(scale: float) -> onnx.ModelProto:
        nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
                 helper.make_node("Gather", ["shape", "zero"], ["rows"], name="gather", axis=0),
                 helper.make_node("Concat", ["rows", "minus_one"], ["target"], name="concat", axis=0),
                 helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
                 helper.make_node("Reshape", ["h1", "target"], ["y"], name="reshape")]
        inits = [numpy_helper.from_array(WEIGHTS["w1"] * np.float32(scale), "w1"),
                 numpy_helper.from_array(np.array([0], np.int64), "zero"),
                 numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [8, 64])],
                                  [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    fused = model(1.05)
    fused.graph.node[3].output[0] = "h1_int8"  # as a quantizer does: h1 is gone, mm1 fused with reshape
    fused.graph.node[4].input[0] = "h1_int8"
    errors = tensor_errors(fused, model(1.0), FEED)
    assert [e.node for e in errors.nodes] == ["reshape"]
    assert set(errors.nodes[0].group) == {"reshape", "mm1"}  # not shape, gather, concat


def test_nodes_a_run_kept_in_float_are_never_blamed(tmp_path):
    """A quantize run that kept /fc2 in float (ORT's pre-processing fused it into a Gemm named
    '/fc2/MatMul/MatMulAddFusion') names neither it nor its bias Add in the ranking or the map:
    before, '/fc2/Add (Add): +0.0013 relative error' was listed."""
    from ..quantize.test_held_out_search import _classifier

    model = _classifier(tmp_path / "clf.onnx")
    q = quantize(model, tmp_path / "clf.int8.onnx", "dynamic",
                 QuantizeOptions(int8_path="avx2", accuracy_target=None, exclude_nodes=["/fc2/MatMul"]))
    assert q.excluded_nodes == ["/fc2/MatMul/MatMulAddFusion"]
    v = q.validation
    blamed = [e for e in v.layers + v.tensors.nodes if {"/fc2/MatMul", "/fc2/Add"} & ({e.node} | set(e.group))]
    assert not blamed, blamed
    assert any(e.node == "/fc1/Add" for e in v.layers)  # the quantized layer still is


def test_the_first_jump_skips_a_node_kept_in_float():
    from onnxport.core.evaluate.tensor_errors import in_reference, without_kept

    reference = mlp(WEIGHTS)
    errors = tensor_errors(mlp(perturbed({"w1": 0.0, "w2": 0.05, "w3": 0.05})), reference, FEED)
    assert errors.first_jump.node == "mm2"
    report = validate_like(errors)
    without_kept(report, in_reference(reference, ["mm2/MatMulAddFusion"]))
    assert report.tensors.first_jump.node == "mm3" and "mm2" not in {e.node for e in report.tensors.nodes}


def validate_like(errors):
    from types import SimpleNamespace

    return SimpleNamespace(layers=list(errors.nodes), tensors=errors)


def _if_model(path: Path, w_then: np.ndarray, w_else: np.ndarray) -> Path:
    """y = If(flag, then: x @ w_then + 1, else: x @ w_else), then an Identity (as silero VAD has)."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    def branch(name: str, w: np.ndarray, plus_one: bool) -> onnx.GraphProto:
        nodes = [helper.make_node("MatMul", ["x", f"{name}_w"], [f"{name}_mm"], name=f"{name}/MatMul")]
        out = f"{name}_mm"
        if plus_one:
            nodes.append(helper.make_node("Add", [out, f"{name}_one"], [f"{name}_y"], name=f"{name}/Add"))
            out = f"{name}_y"
        inits = [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(np.float32(1.0), f"{name}_one")]
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, T.FLOAT, None)], inits)

    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["branch_y"], name="If_0", then_branch=branch("then", w_then, True),
                          else_branch=branch("else", w_else, False)),
         helper.make_node("Identity", ["branch_y"], ["y"], name="out/Identity")],
        "g", [helper.make_tensor_value_info("x", T.FLOAT, ["n", 16]), helper.make_tensor_value_info("flag", T.BOOL, [])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["n", 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_the_error_is_blamed_inside_the_if_branch_it_arises_in(tmp_path):
    """silero VAD's error arises in an LSTM inside an If branch: the map reaches into the branch the
    inputs take and blames the node there, not the If or the Identity after it."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    ref = _if_model(tmp_path / "ref.onnx", w, w)
    cand = _if_model(tmp_path / "cand.onnx", w + 0.05 * rng.standard_normal(w.shape).astype(np.float32), w)
    feed = {"x": rng.standard_normal((4, 16)).astype(np.float32), "flag": np.array(True)}
    report = validate(cand, ref, inputs=[feed], layers=True)
    assert report.tensors.first_jump is not None and report.tensors.first_jump.node == "then/MatMul"
    assert {e.op_type for e in report.tensors.nodes} >= {"MatMul"} and "If" not in {e.op_type for e in report.layers}
