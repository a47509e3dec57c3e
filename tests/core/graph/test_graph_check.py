"""Cyclic graphs (a self-loop, A <-> B, a cycle through a sub-graph's capture or inside a body) and
tensors produced twice are refused with one line before anything is written."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.graph.graph_check import check_graph
from onnxport.core.util.errors import CorruptFileError

from ..external_builders import finish, save
from ..model_builders import forward_mlp


def node(op, inputs, outputs, name, **attrs):
    return helper.make_node(op, inputs, outputs, name=name, **attrs)


def self_loop():
    return finish([node("Add", ["x", "y"], ["y"], "A")])


def two_cycle():
    return finish([node("Add", ["x", "b"], ["a"], "A"), node("Relu", ["a"], ["b"], "B"),
                   node("Identity", ["b"], ["y"], "C")])


def long_cycle_out_of_order():
    """x -> P -> [Q -> R -> S -> Q] -> y, listed in reverse."""
    nodes = [node("Relu", ["p"], ["p2"], "P2"), node("Identity", ["s"], ["y"], "OUT"),
             node("Relu", ["r"], ["s"], "S"), node("Relu", ["q"], ["r"], "R"),
             node("Add", ["p2", "s"], ["q"], "Q"), node("Relu", ["x"], ["p"], "P")]
    return finish(nodes)


def _branch(name, nodes, out):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, T.FLOAT, [4])])


def cycle_through_capture():
    """The If's branch reads `z`, which is computed from the If's own output."""
    then = _branch("then", [node("Identity", ["z"], ["t"], "T")], "t")
    els = _branch("else", [node("Identity", ["x"], ["e"], "E")], "e")
    return finish([node("If", ["cond"], ["i"], "IF", then_branch=then, else_branch=els),
                   node("Relu", ["i"], ["z"], "Z"), node("Identity", ["z"], ["y"], "OUT")],
                  [numpy_helper.from_array(np.array(True), "cond")])


def cycle_inside_body():
    then = _branch("then", [node("Add", ["x", "u"], ["v"], "U"), node("Relu", ["v"], ["u"], "V"),
                            node("Identity", ["u"], ["t"], "T")], "t")
    els = _branch("else", [node("Identity", ["x"], ["e"], "E")], "e")
    return finish([node("If", ["cond"], ["y"], "IF", then_branch=then, else_branch=els)],
                  [numpy_helper.from_array(np.array(True), "cond")])


def produced_twice():
    return finish([node("Relu", ["x"], ["y"], "A"), node("Abs", ["x"], ["y"], "B")])


CASES = {
    "self-loop": (self_loop, "cycle ('A' -> 'A')"),
    "A<->B": (two_cycle, "cycle ('A' -> 'B' -> 'A')"),
    "long": (long_cycle_out_of_order, "cycle ('S' -> 'Q' -> 'R' -> 'S')"),
    "capture": (cycle_through_capture, "cycle ('IF' -> 'Z' -> 'IF')"),
    "body": (cycle_inside_body, "sub-graph 'then_branch' of node 'IF': the graph has a cycle ('U' -> 'V' -> 'U')"),
    "twice": (produced_twice, "tensor 'y' is produced by two nodes ('A' and 'B')"),
}


@pytest.mark.parametrize("case", CASES)
def test_check_graph_names_the_cycle(case):
    build, words = CASES[case]
    with pytest.raises(CorruptFileError) as info:
        check_graph(build().graph, "m.onnx")
    assert str(info.value).startswith("m.onnx: ") and words in str(info.value)


@pytest.mark.parametrize("case", CASES)
def test_export_refuses_cycles_and_keeps_the_output(tmp_path, case, capsys):
    build, words = CASES[case]
    src = tmp_path / "src"
    src.mkdir()
    path = src / "m.onnx"
    save(build(), path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "o.onnx"
    out.write_bytes(b"keep me")
    assert main(["export", str(path), "--outputs", "y", "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and words in err and str(path) in err
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in out_dir.iterdir()) == ["o.onnx"]
    assert sorted(p.name for p in src.iterdir()) == ["m.onnx"]


def test_acyclic_graphs_pass_in_any_order():
    check_graph(forward_mlp().graph, "mlp")
    graph = forward_mlp().graph
    reordered = list(reversed(graph.node))
    del graph.node[:]
    graph.node.extend(reordered)
    check_graph(graph, "reversed mlp")
    long_chain = finish([node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}"], f"n{i}") for i in range(20000)]
                        + [node("Identity", ["t20000"], ["y"], "out")])
    check_graph(long_chain.graph, "chain")  # iterative: no recursion limit on long graphs


def test_a_cycle_outside_the_chosen_outputs_is_refused_too(tmp_path, capsys):
    """The file is not a valid ONNX graph, whatever part of it the export keeps."""
    graph = forward_mlp().graph
    graph.node.extend([node("Add", ["logits", "d2"], ["d1"], "D1"), node("Relu", ["d1"], ["d2"], "D2")])
    model = onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    save(model, path)
    assert main(["export", str(path), "--outputs", "probabilities", "-o", str(tmp_path / "o.onnx"), "-q"]) == 2
    assert "cycle ('D1' -> 'D2' -> 'D1')" in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()
