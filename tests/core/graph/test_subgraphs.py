"""Control flow everywhere: If inside If, Loop and Scan bodies that capture outer weights,
Constants and folded tensors survive export (folded or not), preview and inspect; the writer
never writes a model ORT would refuse, and `export --validate` that fails writes nothing."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.api import export_for_inference
from onnxport.core.cli import main
from onnxport.core.export.drawing import draw_selection
from onnxport.core.export.export import export_model
from onnxport.core.export.options import ExportOptions
from onnxport.core.export.writer import write_model
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.index import build_index
from onnxport.core.graph.runnable import check_runnable, topological_sort
from onnxport.core.graph.uses import graph_captures, subgraph_captures, used_names
from onnxport.core.graph.weightless import weightless_copy
from onnxport.core.util.errors import CorruptFileError, OnnxportError
from onnxport.core.workflow.post_export import ValidationGate

from ..model_builders import selection_preview, session_for
from ..subgraph_models import MODELS, OPSET, nested_if


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, path)
    return str(path)


def _run(path, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return sess.run(outputs, {k: v for k, v in feeds.items() if k in names})


def _folder(path) -> list[str]:
    return sorted(os.listdir(path))


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no-fold"])
@pytest.mark.parametrize("name", list(MODELS))
def test_export_to_its_own_outputs_runs_and_matches_the_original(tmp_path, name, fold):
    build, feeds = MODELS[name]
    model = build()
    src = _save(model, tmp_path / "src.onnx")
    outs = [o.name for o in model.graph.output]
    result = export_model(src, tmp_path / "out.onnx", outs, options=ExportOptions(fold=fold))
    assert result.folded == (1 if fold else 0)  # the Transpose/Mul of a weight a body captures
    written = onnx.load(str(result.path))
    onnx.checker.check_model(written, full_check=True)
    for feed in feeds():
        for got, want in zip(_run(result.path, feed), _run(src, feed), strict=True):
            np.testing.assert_array_equal(got, want)
    top = {n.op_type for n in written.graph.node}
    assert "Constant" in top  # the Constant only a body reads is kept
    inits = {t.name for t in written.graph.initializer}
    assert ("W" not in inits and {"WT", "WN"} & inits) if fold else "W" in inits


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no-fold"])
def test_partial_outputs_of_nested_ifs_match_the_original_and_extract_model(tmp_path, fold):
    src = _save(nested_if(), tmp_path / "src.onnx")
    _, feeds = MODELS["nested_if"]
    extracted = tmp_path / "h_extracted.onnx"
    onnx.utils.extract_model(src, str(extracted), ["x"], ["h"])
    for outputs, reference in ((["y"], src), (["z"], src), (["h"], extracted), (["z", "y"], src)):
        out = export_model(src, tmp_path / f"{'_'.join(outputs)}.onnx", outputs,
                           options=ExportOptions(fold=fold)).path
        for feed in feeds():
            got = _run(out, feed)
            want = _run(reference, feed, outputs)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)


def test_loop_and_scan_partial_outputs(tmp_path):
    for name, outputs in (("loop", ["trace"]), ("scan", ["steps"])):
        build, feeds = MODELS[name]
        src = _save(build(), tmp_path / f"{name}.onnx")
        out = export_model(src, tmp_path / f"{name}_part.onnx", outputs).path
        for feed in feeds():
            np.testing.assert_array_equal(_run(out, feed)[0], _run(src, feed, outputs)[0])


def test_uses_count_captures_at_every_depth():
    model = nested_if()
    outer_if = next(n for n in model.graph.node if n.op_type == "If")
    assert subgraph_captures(outer_if) == {"WT", "C", "B", "h", "x", "flag2"}  # t1 is the body's own
    then_g = next(a.g for a in outer_if.attribute if a.name == "then_branch")
    assert graph_captures(then_g) == {"WT", "C", "B", "x", "flag2"}
    assert {"C", "WT", "h", "B"} <= used_names(model.graph)


@pytest.mark.parametrize("name", list(MODELS))
def test_preview_keeps_what_bodies_read(name):
    """The Original view (weightless) draws every node; a selection's (the export's graph) keeps
    what its bodies read, the If/Loop/Scan included."""
    build, _ = MODELS[name]
    model = build()
    outs = [o.name for o in model.graph.output]
    whole = onnx.load_from_string(weightless_copy(model).SerializeToString())
    assert [n.op_type for n in whole.graph.node] == [n.op_type for n in model.graph.node]
    assert {t.name for t in whole.graph.initializer} == {t.name for t in model.graph.initializer}
    for chosen in (outs, outs[:1]):
        preview = onnx.load_from_string(selection_preview(model, chosen).SerializeToString())
        assert {"If", "Loop", "Scan"} & {n.op_type for n in preview.graph.node}
        assert [o.name for o in preview.graph.output] == chosen
        for drawn in (preview, whole):
            assert all(not t.raw_data and not t.float_data for t in drawn.graph.initializer)
            check_runnable(drawn.graph, "preview")  # nothing a body reads was dropped


def test_preview_strips_weights_held_in_constants_inside_bodies(tmp_path):
    big = np.arange(4096, dtype=np.float32)
    body = helper.make_graph([helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(big, "w")),
                              helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(
                                  np.array([0], np.int64), "axes")),
                              helper.make_node("ReduceSum", ["w", "axes"], ["s"])],
                             "b", [], [helper.make_tensor_value_info("s", T.FLOAT, None)])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)], "g",
                              [helper.make_tensor_value_info("c", T.BOOL, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), tmp_path / "m.onnx")
    data = draw_selection(session_for(path).selections, ["y"]).data
    assert len(data) < 2000 < big.nbytes
    preview = onnx.load_from_string(data)
    then_g = next(a.g for a in preview.graph.node[0].attribute if a.name == "then_branch")
    values = {n.output[0]: n.attribute[0].t for n in then_g.node if n.op_type == "Constant"}
    assert list(values["w"].dims) == [4096] and not values["w"].raw_data  # weight: header only
    assert numpy_helper.to_array(values["axes"]).tolist() == [0]  # small constants keep their values


def test_index_and_inspect_list_tensors_inside_bodies(tmp_path, capsys):
    index = build_index(nested_if())
    assert "h" not in index.suggested and "WT" not in index.suggested  # read by the If: not free outputs
    assert index["h"].consumers == ["outer_if"] and "outer_if" in index["C"].consumers
    paths = [s.path for s in index.subgraphs]
    assert paths == ["outer_if/else_branch", "outer_if/then_branch",
                     "outer_if/then_branch/inner_if/else_branch", "outer_if/then_branch/inner_if/then_branch"]
    inner = {t.name: t for s in index.subgraphs for t in s.tensors}
    assert set(inner) == {"e1", "t1", "t2", "k", "t4", "t5", "t3"}
    assert inner["t1"].kind.value == "intermediate" and inner["t1"].shape == (2, 3) and inner["t1"].dtype == "float32"
    assert inner["t1"].consumers == ["inner_if"] and inner["t1"].subgraph == "outer_if/then_branch"
    assert inner["t2"].kind.value == "output" and inner["k"].producer_op == "Constant" and inner["k"].nbytes == 4
    assert index.subgraphs[2].captures == ["B", "t1"]
    assert all(name not in index for name in inner)  # never offered as export outputs

    path = _save(nested_if(), tmp_path / "m.onnx")
    assert main(["inspect", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["model"]
    subs = {s["path"]: s for s in data["subgraphs"]}
    assert [t["name"] for t in subs["outer_if/then_branch"]["tensors"]] == ["t1", "t2"]
    assert subs["outer_if/then_branch"]["node"] == "outer_if" and subs["outer_if/then_branch"]["op"] == "If"
    assert "h" not in data["suggested_outputs"]
    assert main(["inspect", path, "--all"]) == 0
    text = capsys.readouterr().out
    assert "inner_if (If) then_branch: 1 nodes, 1 tensors; reads C, t1" in text and "t4" in text


def _dropout_model(mask_in_body: bool) -> onnx.ModelProto:
    """A training-mode Dropout whose mask only a body reads, or a Dropout inside a body."""
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    if mask_in_body:
        then_g = helper.make_graph([helper.make_node("Cast", ["mask"], ["m"], to=T.FLOAT)], "t", [],
                                   [helper.make_tensor_value_info("m", T.FLOAT, None)])
        nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["d", "mask"], name="drop"),
                 helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=then_g, name="if")]
    else:
        body = helper.make_graph([helper.make_node("Dropout", ["x", "ratio", "train"], ["m"], name="inner_drop")],
                                 "b", [], [helper.make_tensor_value_info("m", T.FLOAT, None)])
        nodes = [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body, name="if")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [4]),
                                           helper.make_tensor_value_info("c", T.BOOL, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], initializer=[ratio, train])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def test_inference_form_sees_bodies(tmp_path):
    feed = {"x": np.array([1, 2, 3, 4], np.float32), "c": np.array(True)}
    # a mask read inside a body keeps its Dropout (in inference mode): the mask is all ones
    src = _save(_dropout_model(mask_in_body=True), tmp_path / "mask.onnx")
    out = export_model(src, tmp_path / "mask_out.onnx", ["y"]).path
    np.testing.assert_array_equal(_run(out, feed)[0], np.ones(4, np.float32))
    # a Dropout inside a body is put in inference form too
    model = _dropout_model(mask_in_body=False)
    result = to_inference_form(model)
    body = model.graph.node[0].attribute[0].g
    assert result.names() == ["inner_drop", "inner_drop"] and [n.op_type for n in body.node] == ["Identity"]
    src = _save(_dropout_model(mask_in_body=False), tmp_path / "inner.onnx")
    out = export_model(src, tmp_path / "inner_out.onnx", ["y"]).path
    np.testing.assert_array_equal(_run(out, feed)[0], feed["x"])


def _two_node_graph(order: str) -> onnx.ModelProto:
    relu = helper.make_node("Relu", ["x"], ["a"], name="relu")
    neg = helper.make_node("Neg", ["a" if order != "undefined" else "ghost"], ["y"], name="neg")
    nodes = [neg, relu] if order == "unsorted" else [relu, neg]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def test_writer_refuses_unsorted_or_undefined_and_touches_nothing(tmp_path):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    for order, message in (("unsorted", "node 'neg' reads 'a' before node 'relu' makes it"),
                           ("undefined", "node 'neg' reads 'ghost', which no graph input")):
        with pytest.raises(CorruptFileError, match=message):
            write_model(_two_node_graph(order), [], out)
        assert out.read_bytes() == b"previous" and _folder(tmp_path) == ["out.onnx"]


def test_a_body_reading_an_undefined_name_is_refused():
    then_g = helper.make_graph([helper.make_node("Neg", ["ghost"], ["t"], name="inner")], "t", [],
                               [helper.make_tensor_value_info("t", T.FLOAT, None)])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                                else_branch=then_g)], "g",
                              [helper.make_tensor_value_info("c", T.BOOL, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(CorruptFileError, match=r"sub-graph 'else_branch' of node 'if': node 'inner' reads 'ghost'"):
        check_runnable(graph, "m.onnx")
    check_runnable(graph, "m.onnx", defined=["ghost"])  # an initializer the writer adds


def test_a_source_listing_nodes_out_of_order_is_written_sorted(tmp_path):
    src = _save(_two_node_graph("unsorted"), tmp_path / "src.onnx")
    out = export_model(src, tmp_path / "out.onnx", ["y"]).path
    written = onnx.load(str(out))
    onnx.checker.check_model(written)
    assert [n.name for n in written.graph.node] == ["relu", "neg"]
    x = {"x": np.array([-1, 2], np.float32)}
    np.testing.assert_array_equal(_run(out, x)[0], _run(src, x)[0])
    body_model = nested_if()
    then_g = next(a.g for a in body_model.graph.node[3].attribute if a.name == "then_branch")
    then_g.node.reverse()  # If before the MatMul it reads
    assert topological_sort(body_model.graph) and [n.op_type for n in then_g.node] == ["MatMul", "If"]
    assert not topological_sort(body_model.graph)  # sorted: nothing moves


def test_cli_export_of_a_model_ort_would_refuse_exits_2_and_keeps_the_previous_output(tmp_path, capfd):
    src = _save(_two_node_graph("undefined"), tmp_path / "src.onnx")
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    assert main(["export", src, "--outputs", "y", "-o", str(out), "-q"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads 'ghost'" in err[0] and "not written" in err[0]
    assert out.read_bytes() == b"previous" and _folder(tmp_path) == ["out.onnx", "src.onnx"]


def test_export_validate_that_fails_writes_nothing(tmp_path):
    """The gate `export --validate` uses, against a reference that differs (another bias)."""
    src = _save(nested_if(), tmp_path / "src.onnx")
    other = nested_if()
    other.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.zeros(3, np.float32), "B"))
    reference = _save(other, tmp_path / "other.onnx")
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    before = _folder(tmp_path)
    gate = ValidationGate(out, reference)
    with pytest.raises(OnnxportError, match=r"out.onnx: validation failed against other.onnx \(y: .*nothing written"):
        export_for_inference(src, None, ["y", "z"], out, verify=gate)
    assert out.read_bytes() == b"previous" and _folder(tmp_path) == before
    gate = ValidationGate(out, src)  # against its own source: passes, and the report names the final path
    export_for_inference(src, None, ["y", "z"], out, verify=gate)
    assert gate.report.passed and gate.report.model == str(out) and onnx.load(str(out)).graph.node


def test_export_validate_of_a_model_ort_refuses_writes_nothing(tmp_path, capfd):
    bad_type = numpy_helper.from_array(np.ones(2, np.int64), "c")
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])], initializer=[bad_type])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    src = _save(model, tmp_path / "src.onnx")
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    assert main(["export", src, "--outputs", "y", "-o", str(out), "--validate", "-q"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing written" in err[0] and "onnxport-tmp" not in err[0]
    assert out.read_bytes() == b"previous" and _folder(tmp_path) == ["out.onnx", "src.onnx"]


def test_export_validate_with_external_data_validates_before_the_commit(tmp_path, capfd):
    src = _save(MODELS["loop"][0](), tmp_path / "loop.onnx")
    out = tmp_path / "out.onnx"
    args = ["export", src, "--outputs", "final,trace", "-o", str(out), "--validate", "--external-data", "always",
            "--json", "-q"]
    assert main(args) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["validation"]["passed"] is True and report["validation"]["model"] == str(out)
    assert [n for n in _folder(tmp_path) if n.startswith(".")] == []  # no temp folder left


def test_body_shapes_come_back_from_the_shape_inference_child_too(tmp_path):
    """Big graphs are inferred in a child process: it sends the bodies' value_info back as well."""
    from onnxport.core.graph.shape_infer import inferred_value_infos

    path = _save(nested_if(), tmp_path / "m.onnx")
    names = {vi.name for vi in inferred_value_infos(None, path, nodes=1, bodies=True)}
    assert {"t1", "t4", "e1", "h"} <= names
    assert "t1" not in {vi.name for vi in inferred_value_infos(None, path, nodes=1)}
