"""Constant folding within budget: a node whose folded output would blow up stays in the graph.

Every model here is exported; the result must be small, keep the over-budget node, and give
ONNX Runtime's result of the source model. The full-size blow-ups (4 GiB) run in a subprocess
under RLIMIT_AS, so a missing guard fails the test instead of exhausting the machine.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.export import export_model
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.fold_budget import FoldBudget, output_allowed
from onnxport.core.graph.fold_ops import FOLDERS
from onnxport.core.graph.fold_shapes import RULES
from onnxport.core.util.budgets import FOLD_GROWTH_FLOOR, FOLD_OUTPUT_FLOOR, MiB

from ..crafted_files import run_bounded


def save_model(path, nodes, inits, x_shape=(1,)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def export_and_compare(tmp_path, nodes, inits, x_shape=(1,)):
    """Export (folding on); ORT on the result must equal ORT on the source. Returns (result, model)."""
    src = save_model(tmp_path / "src.onnx", nodes, inits, x_shape)
    out = tmp_path / "out.onnx"
    result = export_model(src, out, ["y"])
    x = np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)
    want = ort.InferenceSession(str(src)).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    return result, onnx.load(out)


def ops(model):
    return [n.op_type for n in model.graph.node]


def reduce_to_y(name):
    return [helper.make_node("ReduceSum", [name], ["r"], keepdims=0), helper.make_node("Add", ["x", "r"], ["y"])]


def test_budget_rules():
    assert output_allowed(FOLD_OUTPUT_FLOOR, 0) and not output_allowed(FOLD_OUTPUT_FLOOR + 1, 0)
    assert output_allowed(8 * 10 * MiB, 10 * MiB) and not output_allowed(8 * 10 * MiB + 1, 10 * MiB)
    budget = FoldBudget.for_constants(100 * MiB)
    assert budget.growth == 100 * MiB and budget.allows(100 * MiB, 0) and not budget.allows(100 * MiB + 1, 0)
    assert FoldBudget.for_constants(1).growth == FOLD_GROWTH_FLOOR


def test_concat_of_one_weight_many_times_stays_unfolded(tmp_path):
    w = np.random.default_rng(1).standard_normal(1 << 14).astype(np.float32)  # 64 KiB
    nodes = [helper.make_node("Concat", ["W"] * 64, ["C"], axis=0), *reduce_to_y("C")]  # 4 MiB > 8 x 64 KiB
    result, model = export_and_compare(tmp_path, nodes, [numpy_helper.from_array(w, "W")])
    assert result.folded == 0 and "Concat" in ops(model) and result.size_bytes < 100_000
    # within the factor it folds: 8 copies of 64 KiB
    nodes = [helper.make_node("Concat", ["W"] * 8, ["C"], axis=0), *reduce_to_y("C")]
    result, model = export_and_compare(tmp_path, nodes, [numpy_helper.from_array(w, "W")])
    assert result.folded == 1 and "Concat" not in ops(model)


def test_gather_of_repeated_rows_stays_unfolded(tmp_path):
    table = np.random.default_rng(2).standard_normal((3, 4096)).astype(np.float32)  # 48 KiB
    indices = np.zeros(1024, np.int64)  # 8 KiB of indices -> 16 MiB of rows
    nodes = [helper.make_node("Gather", ["W", "I"], ["G"], axis=0), *reduce_to_y("G")]
    inits = [numpy_helper.from_array(table, "W"), numpy_helper.from_array(indices, "I")]
    result, model = export_and_compare(tmp_path, nodes, inits)
    assert result.folded == 0 and "Gather" in ops(model) and result.size_bytes < 100_000


def test_doubling_chain_stops_at_the_growth_budget(tmp_path):
    w = np.ones(1 << 18, np.float32)  # 1 MiB; six doublings would make 64 MiB
    nodes = [helper.make_node("Concat", ["W", "W"], ["C1"], axis=0)]
    nodes += [helper.make_node("Concat", [f"C{k}", f"C{k}"], [f"C{k + 1}"], axis=0) for k in range(1, 6)]
    result, model = export_and_compare(tmp_path, [*nodes, *reduce_to_y("C6")], [numpy_helper.from_array(w, "W")])
    assert result.folded == 4 and ops(model).count("Concat") == 2  # 16 MiB folded = the floor
    assert result.size_bytes <= FOLD_GROWTH_FLOOR + MiB


def test_diamond_chain_work_is_bounded(tmp_path):
    """X(k+1) = Identity(Xk) + Identity(Xk): each fold re-reads its inputs, so unbounded folding
    would take 2^60 reads; the work budget stops it (small ones are computed once)."""
    for n in (1, 1 << 19):  # 4 bytes (computed at once) and 2 MiB (lazy)
        nodes = []
        for k in range(60):
            nodes += [helper.make_node("Identity", [f"X{k}"], [f"A{k}"]),
                      helper.make_node("Identity", [f"X{k}"], [f"B{k}"]),
                      helper.make_node("Add", [f"A{k}", f"B{k}"], [f"X{k + 1}"])]
        x0 = numpy_helper.from_array(np.full(n, 0.5, np.float32), "X0")
        result, model = export_and_compare(tmp_path, [*nodes, *reduce_to_y("X60")], [x0])
        if n == 1:
            assert result.folded == 180
        else:
            assert 0 < result.folded < 60 and result.size_bytes < 4 * n * 4


def test_invalid_nodes_are_left_for_ort_to_report(tmp_path):
    inits = [numpy_helper.from_array(np.ones(6, np.float32), "W"),
             numpy_helper.from_array(np.array([4, 4], np.int64), "S"),
             numpy_helper.from_array(np.ones((3, 2), np.float32), "W2"),
             numpy_helper.from_array(np.array([0, 7], np.int64), "I")]
    nodes = [helper.make_node("Reshape", ["W", "S"], ["R"]), helper.make_node("Gather", ["W2", "I"], ["G"]),
             helper.make_node("Add", ["R", "G"], ["y"])]
    src = save_model(tmp_path / "src.onnx", nodes, inits)
    result = export_model(src, tmp_path / "out.onnx", ["y"])
    assert result.folded == 0 and ops(onnx.load(tmp_path / "out.onnx")) == ["Reshape", "Gather", "Add"]


def test_constant_claiming_4_tib_is_never_decoded():
    """(Model loading refuses such a file too; folding does not rely on it.)"""
    lying = onnx.TensorProto(name="c", data_type=T.FLOAT, dims=[1 << 40], raw_data=b"\0\0\0\0")
    nodes = [helper.make_node("Constant", [], ["C"], value=lying), helper.make_node("Transpose", ["C"], ["Ct"]),
             helper.make_node("Add", ["x", "Ct"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, None)],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
    result = fold_constants(helper.make_model(graph), {})
    left, needed, folded = result.model.graph.node, result.constants, result.names("folded")
    assert folded == [] and [n.op_type for n in left] == ["Constant", "Transpose", "Add"] and needed == {}


def test_every_folded_op_has_a_shape_rule():
    """A new entry in FOLDERS without a rule in fold_shapes would never fold (no unchecked ops)."""
    assert set(FOLDERS) == set(RULES)


def test_weights_captured_by_subgraphs_survive_folding(tmp_path):
    w = numpy_helper.from_array(np.full(4, 2, np.float32), "W")
    cond = numpy_helper.from_array(np.array(True), "cond")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", T.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "W"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [helper.make_node("Identity", ["W"], ["Wi"]), helper.make_node("Mul", ["x", "Wi"], ["m"]),
             helper.make_node("If", ["cond"], ["i"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["m", "i"], ["y"])]
    result, model = export_and_compare(tmp_path, nodes, [w, cond], x_shape=(4,))
    assert result.folded == 1 and "W" in {t.name for t in model.graph.initializer}


BLOWUP = """
import sys
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
from onnxport.core.export.export import export_model
kind = sys.argv[1]
if kind == "concat":  # 1 MiB weight concatenated 4,096 times: 4 GiB
    inits = [numpy_helper.from_array(np.ones(1 << 18, np.float32), "W")]
    fold = helper.make_node("Concat", ["W"] * 4096, ["C"], axis=0)
else:  # 1 MiB of indices picking one 32 KiB row: 4 GiB
    inits = [numpy_helper.from_array(np.ones((1, 8192), np.float32), "W"),
             numpy_helper.from_array(np.zeros(1 << 17, np.int64), "I")]
    fold = helper.make_node("Gather", ["W", "I"], ["C"], axis=0)
graph = helper.make_graph([fold, helper.make_node("Add", ["x", "C"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "src.onnx")
result = export_model("src.onnx", "out.onnx", ["y"])
print(result.folded, result.size_bytes, [n.op_type for n in onnx.load("out.onnx").graph.node])
"""


@pytest.mark.parametrize("kind", ["concat", "gather"])
def test_4_gib_blowups_export_small_in_bounded_memory(tmp_path, kind):
    done = run_bounded("", limit_gb=1.5, cwd=tmp_path, args=["-c", BLOWUP, kind])
    assert done.returncode == 0, done.stderr[-2000:]
    folded, size, kept = done.stdout.split(" ", 2)
    assert folded == "0" and int(size) < 2 * MiB and ("Concat" if kind == "concat" else "Gather") in kept
