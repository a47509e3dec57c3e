"""Every pass that returns a PassResult, run through the contract checker (support/pass_check.py)
on small graphs built here, one of them a graph no pass has anything to do for; and the checker
itself refuses passes that break the contract in each way it names."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph.const_tensors import from_array
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.passes import REMOVED, REWRITTEN, NodeChange, PassResult
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.graph.rename_ends import rename_ends
from onnxport.core.graph.weightless import KEPT_CONSTANT_BYTES, to_weightless
from tests.support.pass_check import PassContractError, check_pass

from ..model_builders import eval_like_mlp, forward_mlp, make_model, mlp_weights

PARAMS = tuple(mlp_weights())


def relu() -> onnx.ModelProto:
    """Nothing for any pass to do: no weights, no training ops, nothing to prune or fold."""
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [2])])


def training_ops() -> onnx.ModelProto:
    """Dropouts bypassed (two in a row), made Identity, kept for their mask; BatchNorm in training mode."""
    c = np.ones(2, np.float32)
    inits = [numpy_helper.from_array(a, n) for n, a in
             {"r": np.array(0.5, np.float32), "t": np.array(True), "s": c, "b": c, "m": c, "v": c}.items()]
    nodes = [
        helper.make_node("Dropout", ["x", "r", "t"], ["d1"], name="first"),
        helper.make_node("Dropout", ["d1", "r", "t"], ["d2"], name="second"),
        helper.make_node("BatchNormalization", ["d2", "s", "b", "m", "v"], ["bn", "rm", "rv"], name="bn",
                         training_mode=1),
        helper.make_node("Relu", ["bn"], ["relu"], name="relu"),
        helper.make_node("Dropout", ["relu", "r", "t"], ["y", "mask"], name="kept_mask"),
        helper.make_node("Dropout", ["relu"], ["z"], name="to_identity"),
    ]
    outputs = [helper.make_tensor_value_info("y", T.FLOAT, [1, 2]), helper.make_tensor_value_info("mask", T.BOOL, [1, 2]),
               helper.make_tensor_value_info("z", T.FLOAT, [1, 2])]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 2])], outputs, inits)


def with_bodies() -> onnx.ModelProto:
    """An If whose branches hold a Dropout and a Constant too big for a preview to keep its values."""
    big = np.arange(KEPT_CONSTANT_BYTES // 4 + 8, dtype=np.float32)

    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph([
            helper.make_node("Constant", [], [f"{name}_c"], name=f"{name}/const",
                             value=numpy_helper.from_array(big, f"{name}_c")),
            helper.make_node("ReduceSum", [f"{name}_c"], [f"{name}_s"], name=f"{name}/sum", keepdims=0),
            helper.make_node("Add", ["x", f"{name}_s"], [f"{name}_a"], name=f"{name}/add"),
            helper.make_node("Dropout", [f"{name}_a"], [f"{name}_out"], name=f"{name}/dropout"),
        ], name, [], [helper.make_tensor_value_info(f"{name}_out", T.FLOAT, [2])])

    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"], name="positive"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch("then"),
                              else_branch=branch("else")),
             helper.make_node("Neg", ["x"], ["unused"], name="unused")]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [2]),
                       helper.make_tensor_value_info("unused", T.FLOAT, [2])],
                      [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])


def constant_weights() -> onnx.ModelProto:
    """A weight held in a Constant node, transposed before its MatMul: folding computes the Transpose."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    nodes = [helper.make_node("Constant", [], ["w"], name="w", value=numpy_helper.from_array(w, "w")),
             helper.make_node("Transpose", ["w"], ["wT"], name="wT", perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wT"], ["y"], name="mm")]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [1, 3])])


def typed_constant_weights() -> onnx.ModelProto:
    """`constant_weights` declaring the type of the tensor folding makes a constant (a note when dropped)."""
    model = constant_weights()
    model.graph.value_info.append(helper.make_tensor_value_info("wT", T.FLOAT, [3, 4]))
    return model


def weights_beside(model: onnx.ModelProto) -> dict:
    """The model's initializers taken out (as the export holds them) as constants by name."""
    consts = {t.name: from_array(t.name, numpy_helper.to_array(t)) for t in model.graph.initializer}
    del model.graph.initializer[:]
    return consts


def run_prune(outputs):
    return lambda model: prune(model, plan_prune(model, outputs))


# (the pass, the model it runs on, whether it changes it)
CASES = {
    "prune mlp to logits": (run_prune(["logits"]), forward_mlp, True),
    "prune eval graph to an intermediate tensor": (run_prune(["logits"]), eval_like_mlp, True),
    "prune away an unused branch": (run_prune(["y"]), with_bodies, True),
    "prune, nothing to do": (run_prune(["y"]), relu, False),
    "inference form of training ops": (to_inference_form, training_ops, True),
    "inference form of an mlp": (to_inference_form, forward_mlp, True),
    "inference form in bodies": (to_inference_form, with_bodies, True),
    "inference form, nothing to do": (to_inference_form, relu, False),
    "fold a Constant's Transpose": (lambda model: fold_constants(model, {}), constant_weights, True),
    "fold drops the type of a folded tensor": (lambda model: fold_constants(model, {}), typed_constant_weights, True),
    "fold, nothing to do": (lambda model: fold_constants(model, {}), relu, False),
    "weightless eval graph": (to_weightless, eval_like_mlp, True),  # its Dropout ratio, a scalar, too
    "weightless mlp": (to_weightless, forward_mlp, True),
    "weightless bodies": (to_weightless, with_bodies, True),
    "weightless, nothing to do": (to_weightless, relu, False),
    "rename the ends": (lambda model: rename_ends(model, {"x": "pixels", "y": "scores"}), with_bodies, True),
    "rename, nothing to do": (lambda model: rename_ends(model, {}), relu, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_pass_keeps_its_contract(case):
    run, build, changes = CASES[case]
    model = build()
    result = check_pass(run, model)
    assert result.changed is changes
    again = check_pass(run, model)  # and run again on its own result, it changes nothing
    assert not again.changed or case.startswith("fold")


def test_fold_with_the_weights_beside_the_model_keeps_its_contract():
    model = forward_mlp()
    consts = weights_beside(model)
    result = check_pass(fold_constants, model, consts, beside=consts)
    assert result.names() == ["/fc1/Transpose", "/fc2/Transpose"]


def test_weightless_reports_the_constants_it_strips():
    result = check_pass(to_weightless, with_bodies())
    assert sorted((c.node, c.action) for c in result.changes) == [("else/const", REWRITTEN), ("then/const", REWRITTEN)]


# Passes that break the contract, one rule each: the checker names the rule.

def copies(model):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[1:]
    return PassResult(copy, changed=True, changes=[NodeChange("/fc1/MatMul", REMOVED)])


def removes_silently(model):
    model.graph.node.remove(model.graph.node[-1])  # the Softmax
    return PassResult(model, changed=True)


def says_unchanged(model):
    model.graph.node[-1].attribute[0].i = 0
    return PassResult(model)


def claims_a_change(model):
    return PassResult(model, changed=True, changes=[NodeChange("/softmax/Softmax", REMOVED, "not really")])


def rewires_unreported(model):
    model.graph.node[-1].input[0] = "fc2.mm"  # Softmax reads another tensor; nothing was removed
    return PassResult(model, changed=True)


def reports_twice(model):
    model.graph.node[-1].attribute[0].i = 0
    change = NodeChange("/softmax/Softmax", REWRITTEN)
    return PassResult(model, changed=True, changes=[change, change])


def breaks_the_graph(model):
    model.graph.node.remove(model.graph.node[0])  # its output is still read
    return PassResult(model, changed=True, changes=[NodeChange("/fc1/Transpose", REMOVED)])


def returns_the_model(model):
    return model


@pytest.mark.parametrize(("broken", "rule"), [
    (copies, "not the model given"),
    (removes_silently, "'/softmax/Softmax': 1 before, 0 after, and no change reported"),
    (says_unchanged, "changed=False but the model differs"),
    (claims_a_change, "changed=True but the model is the same"),
    (rewires_unreported, "'/softmax/Softmax' differs after the pass and no change is reported"),
    (reports_twice, "'/softmax/Softmax' has 2 changes"),
    (breaks_the_graph, "fails onnx.checker"),
    (returns_the_model, "returned ModelProto, not a PassResult"),
])
def test_the_checker_refuses_a_pass_that_breaks_the_contract(broken, rule):
    with pytest.raises(PassContractError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        check_pass(broken, forward_mlp())


def test_the_checker_refuses_a_removal_of_a_node_still_there():
    def removes_nothing(model):
        model.graph.node[-1].attribute[0].i = 0
        return PassResult(model, changed=True, changes=[NodeChange("/softmax/Softmax", REMOVED)])

    with pytest.raises(PassContractError, match="'/softmax/Softmax': 1 before, 1 after, but removed reported"):
        check_pass(removes_nothing, forward_mlp())
