"""The tensor index: kinds, shapes, scopes, training-only marks, suggested outputs."""

from __future__ import annotations

import onnx

from onnxport.core.graph.index import TensorKind, build_index, scope_of
from onnxport.core.params.match import match_parameters
from onnxport.core.util.suggest import close_names

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights, param_set


def test_eval_graph_index_marks_training_and_suggests_forward_outputs():
    model = eval_like_mlp()
    index = build_index(model, parameter_names=mlp_weights())
    assert index.graph_inputs == ["input", "labels"]
    assert set(index.parameters) >= set(mlp_weights())
    assert index["labels"].training_only and index["onnx::loss::1"].training_only
    assert not index["logits"].training_only
    assert index.suggested == ["logits", "probabilities"]
    assert index.default_outputs() == ["logits", "probabilities"]
    assert index["fc1.weight"].kind is TensorKind.PARAMETER
    assert index["fc1.weight"].scope == "fc1"  # from its first consumer
    assert index["hidden"].shape == ("batch", 16)  # shape inference ran
    assert index["hidden"].producer_op == "Relu" and index["hidden"].consumers == ["/dropout/Dropout"]
    assert list(index.tensors)[0] == "onnx::loss::1"  # graph outputs first
    assert "probabilities" in close_names("probabilites", (t.name for t in index.selectable()))


def test_forward_model_defaults_to_its_graph_outputs():
    index = build_index(forward_mlp())
    assert index.default_outputs() == ["logits", "probabilities"]
    assert index["logits"].is_graph_output and index["logits"].kind is TensorKind.OUTPUT


def test_scope_from_node_names():
    assert scope_of("/encoder/layer.0/attention/self/MatMul_1") == "encoder/layer.0/attention/self"
    assert scope_of("MatMul_3") == ""


def test_match_reports_missing_unexpected_mismatched():
    weights = mlp_weights()
    weights["extra.weight"] = weights.pop("fc2.bias")
    weights["fc1.bias"] = weights["fc1.bias"][:3]
    m = match_parameters(eval_like_mlp(), param_set(weights, frozen={"fc2.weight"}))
    assert m.missing == ["fc2.bias"]
    assert m.unexpected == ["extra.weight"]
    assert [x.name for x in m.mismatched] == ["fc1.bias"]
    assert "fc2.weight" in m.frozen and not m.ok
    assert "1 missing" in m.summary()


def test_index_of_large_inline_model_does_not_need_weights(tmp_path):
    # shape inference runs on a weight-free copy: the index is built from dims alone
    model = forward_mlp()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    index = build_index(onnx.load(path), path)
    assert index["fc1.weight"].nbytes == 16 * 8 * 4


def test_bundled_example_suggests_forward_outputs_not_the_dangling_dropout_constant():
    """ORT's artifacts drop a Dropout's training_mode input and leave its Constant dangling."""
    from onnxport.core.io.model_io import load_graph
    from onnxport.resources import example_files

    model_path, _ = example_files()
    model = load_graph(model_path)
    assert any(n.op_type == "Constant" and n.output[0] == "/dropout/Constant_1_output_0" for n in model.graph.node)
    index = build_index(model, parameter_names={"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    assert index.default_outputs() == ["logits", "probabilities"]


def test_big_graphs_are_shape_inferred_in_a_child_process(tmp_path, monkeypatch):
    """Above the threshold inference runs out of process (it holds the GIL) and answers in
    compact JSON lines (shape_types); same dtypes and shapes either way, and a child that fails
    falls back to in-process inference."""
    from onnxport.core.graph import index as index_module
    from onnxport.core.graph import shape_infer, shape_types

    path = tmp_path / "mlp.onnx"
    onnx.save(forward_mlp(), path)
    model = onnx.load(path)
    in_process = build_index(model, path)
    started = []
    real_start = shape_types.TypeInference.start.__func__
    monkeypatch.setattr(shape_types.TypeInference, "start",
                        classmethod(lambda cls, p: started.append(p) or real_start(cls, p)))
    monkeypatch.setattr(index_module, "OUT_OF_PROCESS_NODES", 1)
    monkeypatch.setattr(shape_infer, "OUT_OF_PROCESS_NODES", 1)
    monkeypatch.setattr(shape_types, "LINE_TENSORS", 2)  # several lines
    out_of_process = build_index(model, path)
    assert started == [path]
    assert out_of_process["hidden"].shape == in_process["hidden"].shape == ("batch", 16)
    summary = {n: (t.dtype, t.shape) for n, t in in_process.tensors.items()}
    assert {n: (t.dtype, t.shape) for n, t in out_of_process.tensors.items()} == summary
    monkeypatch.setattr(shape_types, "TARGET", "tests.core.util.child_functions:exit_3")  # a child that fails
    assert {n: (t.dtype, t.shape) for n, t in build_index(model, path).tensors.items()} == summary
    # without a path the weight-free graph is piped to the child
    assert build_index(model)["hidden"].shape == ("batch", 16)


def test_training_only_from_the_table_is_what_the_index_marks():
    """The CLI's export review asks only this (no index): it must agree with the index."""
    from onnxport.core.graph.graph_table import GraphTable
    from onnxport.core.graph.index import training_only

    model = eval_like_mlp()
    params = mlp_weights()
    index = build_index(model, parameter_names=params)
    marked = {name for name, info in index.tensors.items() if info.training_only}
    assert marked and training_only(model, GraphTable.read(model.graph), params) == marked


def test_the_index_gives_back_the_types_it_read_and_none_while_they_are_pending():
    from onnx import TensorProto, helper

    from onnxport.core.graph.index import build_index
    from onnxport.core.graph.tensor_info import TensorInfo, TensorKind, shape_of, tensor_type
    from onnxport.core.io.parameter_set import dtype_name, elem_type_of

    vtype = helper.make_tensor_type_proto(TensorProto.FLOAT16, ["batch", 3, None])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Cast", ["y"], ["z"], to=7)],
                              "g", [helper.make_value_info("x", vtype)],
                              [helper.make_tensor_value_info("z", TensorProto.INT64, None)])
    index = build_index(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert shape_of(index.tensor_type("y")) == (index["y"].dtype, index["y"].shape)
    assert index["y"].dtype == "float16" and index["y"].shape[:2] == ("batch", 3)
    unknown_dim = TensorInfo("t", TensorKind.OUTPUT, "float32", ("b", 2, None))
    assert shape_of(tensor_type(unknown_dim)) == ("float32", ("b", 2, None))
    assert shape_of(tensor_type(TensorInfo("s", TensorKind.OUTPUT, "int64", ()))) == ("int64", ())  # a scalar
    assert shape_of(index.tensor_type("z"))[0] == "int64" and index.tensor_type("nothing") is None
    index.pending_types = object()  # types still coming: none is given out
    assert index.tensor_type("y") is None
    for elem_type in (TensorProto.FLOAT, TensorProto.BFLOAT16, TensorProto.INT4, TensorProto.STRING):
        assert elem_type_of(dtype_name(elem_type)) == elem_type
    assert elem_type_of("sequence_type") is None and elem_type_of("undefined") is None
