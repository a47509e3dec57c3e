"""Constant folding (graph.fold): every op the folder evaluates gives what ONNX's reference gives.

Each case is one node whose inputs are all constants, followed by an Identity to the graph output
(graph outputs stay produced by nodes, so the Identity is kept). The folded constant, and the
folded model run with it, must equal `onnx.reference.ReferenceEvaluator` on the unfolded graph:
same dtype, same shape, same bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxport.core.graph.const_tensors import from_array
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.fold_ops import FOLDERS
from onnxport.core.graph.passes import FOLDED, REMOVED

from ..model_builders import make_model

I64 = np.int64
RNG = np.random.default_rng(7)
F32 = RNG.standard_normal((2, 3, 4)).astype(np.float32)


@dataclass
class Case:
    op: str
    inputs: dict[str, np.ndarray]  # name -> constant value, in the node's input order ("" = absent)
    attrs: dict = field(default_factory=dict)
    opset: int = 17
    id: str = ""


def c(op, inputs, opset=17, id="", **attrs) -> Case:
    return Case(op, inputs, attrs, opset, id or op)


CASES = [
    c("Transpose", {"d": F32}, perm=[2, 0, 1]),
    c("Transpose", {"d": F32}, id="Transpose-default-perm"),
    c("Reshape", {"d": F32, "s": np.array([4, -1], I64)}),
    c("Reshape", {"d": F32, "s": np.array([0, 0, 2, 2], I64)}, id="Reshape-zero-copies-dim"),
    c("Reshape", {"d": np.zeros((0, 3), np.float32), "s": np.array([3, 0], I64)}, allowzero=1,
      id="Reshape-allowzero"),
    c("Unsqueeze", {"d": F32, "a": np.array([0, -1], I64)}),
    c("Unsqueeze", {"d": F32}, opset=11, axes=[1, 4], id="Unsqueeze-attr-opset11"),
    c("Squeeze", {"d": F32.reshape(2, 1, 3, 1, 4), "a": np.array([1, -2], I64)}),
    c("Squeeze", {"d": F32.reshape(1, 2, 3, 4, 1)}, id="Squeeze-all-ones"),
    c("Squeeze", {"d": F32.reshape(2, 1, 12)}, opset=11, axes=[1], id="Squeeze-attr-opset11"),
    c("Flatten", {"d": F32}),
    c("Flatten", {"d": F32}, axis=0, id="Flatten-axis0"),
    c("Flatten", {"d": F32}, axis=-1, id="Flatten-negative-axis"),
    c("Flatten", {"d": F32}, axis=3, id="Flatten-axis-rank"),
    c("Cast", {"d": np.array([-2.7, -0.5, 0.0, 3.9, 100.2], np.float32)}, to=T.INT32, id="Cast-float-int32"),
    c("Cast", {"d": F32}, to=T.DOUBLE, id="Cast-float-double"),
    c("Cast", {"d": (F32 * 1e3).astype(np.float64)}, to=T.FLOAT16, id="Cast-double-float16"),
    c("Cast", {"d": np.array([0, 1, -3, 2**40], I64)}, to=T.FLOAT, id="Cast-int64-float"),
    c("Cast", {"d": np.array([0.0, -0.0, 2.5, np.nan], np.float32)}, to=T.BOOL, id="Cast-float-bool"),
    c("Cast", {"d": np.array([True, False])}, to=T.UINT8, id="Cast-bool-uint8"),
    c("Concat", {"d": F32, "e": F32[:, :1] + 1}, axis=1),
    c("Concat", {"d": F32, "d2": F32}, axis=-1, id="Concat-negative-axis"),
    c("Gather", {"d": F32, "i": np.array([2, 0, -1], I64)}, axis=1),
    c("Gather", {"d": F32, "i": np.array([[1, 0], [0, 1]], np.int32)}, id="Gather-2d-int32-indices"),
    c("Gather", {"d": F32, "i": np.array(3, I64)}, axis=2, id="Gather-scalar-index"),
    c("Slice", {"d": F32, "st": np.array([1, -3], I64), "en": np.array([100, -1], I64),
                "ax": np.array([1, 2], I64)}),
    c("Slice", {"d": F32, "st": np.array([-1], I64), "en": np.array([-(2**63)], I64),
                "ax": np.array([2], I64), "sp": np.array([-2], I64)}, id="Slice-negative-step-to-start"),
    c("Slice", {"d": F32, "st": np.array([0, 0], I64), "en": np.array([2, 4], I64)}, id="Slice-default-axes"),
    c("Slice", {"d": F32}, opset=9, starts=[0, 1], ends=[1, 1000], axes=[0, 2], id="Slice-attrs-opset9"),
    c("Identity", {"d": np.arange(6, dtype=I64).reshape(2, 3)}),
    c("Add", {"d": F32, "e": np.float32(0.1) * F32[0, 0]}),
    c("Add", {"d": F32.astype(np.float16), "e": np.float16(1e-3)}, id="Add-float16-broadcast-scalar"),
    c("Sub", {"d": F32.astype(np.float64), "e": F32[:, :, :1].astype(np.float64)}),
    c("Mul", {"d": F32, "e": np.array([np.inf, -1, 0, 1e-38], np.float32)}),
]


def unfolded(case: Case) -> tuple[onnx.ModelProto, dict]:
    names = [n for n in case.inputs]
    node = helper.make_node(case.op, names, ["t"], name=f"{case.op.lower()}_node", **case.attrs)
    out = helper.make_node("Identity", ["t"], ["y"], name="to_output")
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in case.inputs.items()]
    model = make_model([node, out], [], [helper.make_tensor_value_info("y", T.UNDEFINED, None)],
                       inits, opset=case.opset)
    consts = {n: from_array(n, np.asarray(v)) for n, v in case.inputs.items()}
    return model, consts


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_every_folded_op_equals_the_onnx_reference(case):
    model, consts = unfolded(case)
    (want,) = ReferenceEvaluator(model).run(None, {})
    graph_only = onnx.ModelProto()
    graph_only.CopyFrom(model)
    del graph_only.graph.initializer[:]  # the export folds a weight-free copy; weights come as constants
    result = fold_constants(graph_only, consts)
    assert result.model is graph_only and result.changed
    assert result.names(FOLDED) == [f"{case.op.lower()}_node"]  # it did fold (else nothing is tested)
    assert [n.name for n in graph_only.graph.node] == ["to_output"]
    assert set(result.constants) == {"t"}  # the folded-away inputs are no longer needed
    got = result.constants["t"].values()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)
    assert result.constants["t"].shape == want.shape and result.constants["t"].nbytes == want.nbytes
    graph_only.graph.initializer.append(numpy_helper.from_array(got, "t"))
    (again,) = ReferenceEvaluator(graph_only).run(None, {})
    np.testing.assert_array_equal(again, want, strict=True)


def test_every_op_the_folder_knows_has_a_case():
    assert {case.op for case in CASES} == set(FOLDERS)


def test_chains_fold_and_consumed_constant_nodes_go():
    """A Constant read only by a folded node is REMOVED; a graph input stops folding."""
    shape = helper.make_node("Constant", [], ["shape"], name="shape_const",
                             value=numpy_helper.from_array(np.array([12, 2], I64)))
    nodes = [shape, helper.make_node("Transpose", ["w"], ["wt"], name="tr", perm=[1, 0]),
             helper.make_node("Reshape", ["wt", "shape"], ["w2"], name="rs"),
             helper.make_node("MatMul", ["x", "w2"], ["y"], name="mm")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 12])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [1, 2])])
    model.graph.value_info.append(helper.make_tensor_value_info("wt", T.FLOAT, [6, 4]))
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    result = fold_constants(model, {"w": from_array("w", w)})
    assert result.names(FOLDED) == ["tr", "rs"] and result.names(REMOVED) == ["shape_const"]
    assert [n.name for n in model.graph.node] == ["mm"] and list(result.constants) == ["w2"]
    assert list(model.graph.value_info) == [] and result.notes  # 'wt' is gone: its value_info too
    np.testing.assert_array_equal(result.constants["w2"].values(), w.T.reshape(12, 2))


def test_nothing_to_fold_is_no_change():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    before = model.SerializeToString()
    result = fold_constants(model, {})
    assert not result.changed and result.changes == [] and model.SerializeToString() == before


def test_nothing_foldable_reads_no_constant(monkeypatch):
    """A graph where no node's inputs are all constants (shape arithmetic on a runtime tensor) is
    left as it is without the folder reading any Constant node; one nothing reads still goes."""
    import onnxport.core.graph.fold as fold

    read: list[str] = []
    real = fold.constant_node_tensor
    monkeypatch.setattr(fold, "constant_node_tensor", lambda node: read.append(node.name) or real(node))
    shape = helper.make_node("Constant", [], ["shape"], name="shape_const",
                             value=numpy_helper.from_array(np.array([2, 6], I64)))
    unread = helper.make_node("Constant", [], ["unread"], name="unread_const",
                              value=numpy_helper.from_array(np.array([1], I64)))
    nodes = [shape, unread, helper.make_node("Reshape", ["x", "shape"], ["xr"], name="rs"),
             helper.make_node("MatMul", ["xr", "w"], ["y"], name="mm")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2, 5])])
    w = RNG.standard_normal((6, 5)).astype(np.float32)
    result = fold_constants(model, {"w": from_array("w", w)})
    assert read == [] and result.names(FOLDED) == [] and result.names(REMOVED) == ["unread_const"]
    assert [n.name for n in model.graph.node] == ["shape_const", "rs", "mm"] and list(result.constants) == ["w"]
