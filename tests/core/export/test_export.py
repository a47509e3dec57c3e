"""Export on self-built models: pruning, parameters embedded, eval mode, folding, atomic writes.

These run without the training package (CI runs them again with current onnxruntime/onnx).
"""

from __future__ import annotations

import os
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.export.export import export_model, plan_export
from onnxport.core.export.options import ExportOptions
from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.util.errors import (
    Cancelled,
    CheckpointMismatchError,
    NominalCheckpointError,
    OnnxportError,
    UnknownOutputError,
)
from onnxport.core.util.progress import CancelToken

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights, param_set, reference_mlp


def run(path, feeds, outputs=None):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(outputs, feeds)


@pytest.fixture
def eval_model(tmp_path):
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    return path


def test_eval_graph_export_embeds_params_and_drops_labels(eval_model, tmp_path):
    w = mlp_weights(seed=3)
    out = tmp_path / "inference.onnx"
    result = export_model(eval_model, out, ["probabilities", "logits"], param_set(w))
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["input"]  # labels and parameters gone
    assert [o.name for o in model.graph.output] == ["probabilities", "logits"]  # in the order asked
    assert not any(n.op_type in ("SoftmaxCrossEntropyLoss", "Dropout") for n in model.graph.node)
    assert not any(n.op_type == "Transpose" for n in model.graph.node)  # folded
    assert result.folded == 2
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    probs, logits = run(out, {"input": x})
    ref_logits, ref_probs = reference_mlp(x, w)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-5)
    np.testing.assert_allclose(probs, ref_probs, atol=1e-6)
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["onnxport.outputs"] == '["probabilities", "logits"]'
    assert "eval_model.onnx" in meta["onnxport.sources"]
    assert model.ir_version == 8 and model.opset_import[0].version == 17


def test_no_fold_keeps_graph_as_ort_would(eval_model, tmp_path):
    w = mlp_weights(seed=3)
    folded, plain = tmp_path / "a.onnx", tmp_path / "b.onnx"
    export_model(eval_model, folded, ["logits"], param_set(w))
    export_model(eval_model, plain, ["logits"], param_set(w), options=ExportOptions(fold=False))
    plain_model = onnx.load(plain)
    assert sum(n.op_type == "Transpose" for n in plain_model.graph.node) == 2
    assert {t.name for t in plain_model.graph.initializer} >= set(w)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_array_equal(run(folded, {"input": x})[0], run(plain, {"input": x})[0])


def test_intermediate_tensor_as_output(eval_model, tmp_path):
    w = mlp_weights()
    out = tmp_path / "hidden.onnx"
    export_model(eval_model, out, ["hidden"], param_set(w))
    model = onnx.load(out)
    assert {t.name for t in model.graph.initializer} == {"fc1.wT", "fc1.bias"}  # fc2 pruned away
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    x = np.ones((1, 8), np.float32)
    (hidden,) = run(out, {"input": x})
    np.testing.assert_allclose(hidden, np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0), atol=1e-6)


def test_plain_onnx_model_without_checkpoint(tmp_path):
    src = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), src)
    out = tmp_path / "pruned.onnx"
    export_model(src, out, ["logits"])
    assert [o.name for o in onnx.load(out).graph.output] == ["logits"]


def test_unknown_output_suggests_close_names(eval_model, tmp_path):
    with pytest.raises(UnknownOutputError) as err:
        export_model(eval_model, tmp_path / "x.onnx", ["probabilites"], param_set(mlp_weights()))
    assert "probabilities" in err.value.one_line()
    assert not (tmp_path / "x.onnx").exists()


def test_nominal_and_mismatched_checkpoints_are_refused(eval_model, tmp_path):
    out = tmp_path / "x.onnx"
    out.write_bytes(b"precious")
    nominal = param_set(mlp_weights())
    nominal.nominal = True
    with pytest.raises(NominalCheckpointError):
        export_model(eval_model, out, ["logits"], nominal)
    wrong = mlp_weights(d_hidden=12)
    with pytest.raises(CheckpointMismatchError) as err:
        export_model(eval_model, out, ["logits"], param_set(wrong))
    assert "fc1.weight" in str(err.value)
    missing = mlp_weights()
    del missing["fc2.bias"]
    with pytest.raises(CheckpointMismatchError, match="fc2.bias"):
        export_model(eval_model, out, ["logits"], param_set(missing))
    assert out.read_bytes() == b"precious"


def test_cancel_leaves_nothing_and_keeps_existing_file(eval_model, tmp_path):
    out = tmp_path / "x.onnx"
    out.write_bytes(b"precious")
    token = CancelToken()
    calls = []

    def progress(fraction, message):
        calls.append(message)
        if message == "writing parameters":
            token.cancel()

    with pytest.raises(Cancelled):
        export_model(eval_model, out, ["logits"], param_set(mlp_weights()), progress=progress, cancel=token)
    assert out.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == ["eval_model.onnx", "x.onnx"]


def test_unwritable_destination_is_a_clear_error(eval_model, tmp_path):
    with pytest.raises(OnnxportError, match="does not exist"):
        export_model(eval_model, tmp_path / "nope" / "x.onnx", ["logits"], param_set(mlp_weights()))


def test_external_data_always(tmp_path):
    eval_model = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=64), eval_model)
    w = mlp_weights(d_hidden=64)
    out = tmp_path / "ext.onnx"
    result = export_model(eval_model, out, ["probabilities"], param_set(w),
                          options=ExportOptions(external_data="always"))
    # the data file is named for its run (ext.onnx.<8 hex>.data), so a model never meets another run's data
    assert result.data_path.parent == tmp_path and re.fullmatch(r"ext\.onnx\.[0-9a-f]{8}\.data", result.data_path.name)
    model = onnx.load(out, load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external, "large tensors should live in the data file"
    for t in external:
        assert int({e.key: e.value for e in t.external_data}["offset"]) % 4096 == 0
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(run(out, {"input": x})[0], reference_mlp(x, w)[1], atol=1e-6)


def test_plan_export_summarises_without_writing(eval_model):
    model = onnx.load(eval_model)
    plan = plan_export(SelectionGraphs(model, eval_model, param_set(mlp_weights())), None, ["hidden"])
    assert plan.inputs == ["input"]
    assert "labels" in plan.dropped_inputs
    assert set(plan.kept_parameters) == {"fc1.weight", "fc1.bias"}
    assert set(plan.dropped_parameters) >= {"fc2.weight", "fc2.bias"}
    # 4 nodes kept by pruning, the Transpose of fc1.weight folded: 3 written (tests/core/export/test_plan_written)
    assert plan.kept_nodes == 3 and plan.folded_nodes == 1 and plan.dropped_nodes == 6 and plan.exact
    assert plan.estimated_bytes > (16 * 8 + 16) * 4


def test_export_refuses_to_overwrite_its_source(eval_model):
    with pytest.raises(OnnxportError, match="overwrite the source"):
        export_model(eval_model, eval_model, ["logits"], param_set(mlp_weights()))


def test_source_model_with_external_data_is_copied_not_loaded(tmp_path):
    weights = mlp_weights(d_hidden=64)
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src = src_dir / "forward.onnx"
    onnx.save(forward_mlp(weights), src, save_as_external_data=True, all_tensors_to_one_file=True,
              location="forward.onnx.data", size_threshold=256)
    out = tmp_path / "out.onnx"
    export_model(src, out, ["probabilities"], options=ExportOptions(fold=False))
    model = onnx.load(out)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(run(out, {"input": x})[0], reference_mlp(x, weights)[1], atol=1e-6)
    (src_dir / "forward.onnx.data").write_bytes(b"short")
    with pytest.raises(OnnxportError, match="external data"):
        export_model(src, tmp_path / "broken.onnx", ["probabilities"])
    assert not (tmp_path / "broken.onnx").exists()



def test_a_cancel_arriving_after_the_rename_does_not_report_cancelled(tmp_path):
    """The last progress call comes once the file is in place: it must not raise Cancelled."""
    src = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), src)
    token = CancelToken()
    out = tmp_path / "out.onnx"

    def progress(fraction, message):
        if out.exists():
            token.cancel()  # the user clicks Cancel just as the export finishes

    result = export_model(src, out, ["logits"], progress=progress, cancel=token)
    assert result.path == out and out.exists() and token.cancelled


def test_big_tensors_are_copied_as_they_are_with_nothing_added(tmp_path):
    """A big tensor copied from the checkpoint (by the kernel) gets no padding in its doc_string
    (it was 4 KB of spaces, to page-align the copy): the user's tensor carries what the source
    gave it, nothing more, and its values exactly."""
    from onnxport.core.io.readers import read_parameters
    from tests.support.checkpoint_writer import write_checkpoint

    weights = mlp_weights(d_in=1024, d_hidden=512)  # fc1.weight: 2 MiB
    write_checkpoint(tmp_path / "checkpoint", weights)
    params = read_parameters(tmp_path / "checkpoint")
    src_offset = params["fc1.weight"].span.offset
    model = eval_like_mlp(d_hidden=512)
    for vi in model.graph.input:
        if vi.name == "input":
            vi.type.tensor_type.shape.dim[1].dim_value = 1024
        if vi.name == "fc1.weight":
            vi.type.tensor_type.shape.dim[1].dim_value = 1024
    onnx.save(model, tmp_path / "eval_model.onnx")
    out = tmp_path / "out.onnx"
    export_model(tmp_path / "eval_model.onnx", out, ["logits"], params, options=ExportOptions(fold=False))
    data = out.read_bytes()
    assert src_offset > 0 and data.find(weights["fc1.weight"].tobytes()) > 0  # copied whole
    loaded = onnx.load(out)
    init = {t.name: t for t in loaded.graph.initializer}
    assert all(t.doc_string == "" for t in loaded.graph.initializer)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(init["fc1.weight"]), weights["fc1.weight"])
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def test_an_intermediate_output_takes_the_type_the_index_knows_instead_of_inference(eval_model, tmp_path, monkeypatch):
    """Shape inference holds the GIL (31-42 ms for the 1B decoder's early exit): the app's export
    gives an output the type its index already has and infers none."""
    from onnxport.core.graph.index import build_index

    model = onnx.load(eval_model)
    index = build_index(model, parameter_names=set(param_set(mlp_weights())))
    middle = next(t for t in index.selectable() if not t.is_graph_output and t.dtype is not None)
    inferred = []
    real = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: inferred.append(1) or real(*a, **k))

    def export(name, known_types=None):
        from onnxport.core.export.export import export_selection
        from onnxport.core.export.selection_graph import SelectionGraphs

        inferred.clear()
        graphs = SelectionGraphs(onnx.load(eval_model), eval_model, param_set(mlp_weights()), known_types=known_types)
        export_selection(graphs, [middle.name], tmp_path / name)
        return onnx.load(tmp_path / name).graph.output[0].type, len(inferred)

    by_inference, calls = export("inferred.onnx")
    by_index, calls_known = export("known.onnx", known_types=index.tensor_type)
    assert calls_known == calls - 1  # the output's inference, and only it, is gone
    assert by_index == by_inference == index.tensor_type(middle.name)
    # a type the index does not know (types pending, or none found) is inferred as before
    _, calls_unknown = export("unknown.onnx", known_types=lambda name: None)
    assert calls_unknown == calls


def test_a_plan_too_big_to_infer_still_counts_the_types_the_index_knows(eval_model, monkeypatch):
    from onnxport.core.export import selection_graph
    from onnxport.core.graph.index import build_index

    model, params = onnx.load(eval_model), param_set(mlp_weights())
    index = build_index(model, parameter_names=set(params))
    middle = next(t for t in index.selectable() if not t.is_graph_output and t.dtype is not None)
    inferred = plan_export(SelectionGraphs(model, None, params), None, [middle.name]).estimated_bytes  # inferred
    monkeypatch.setattr(selection_graph, "TYPED_MAX_NODES", 0)  # as if too big to infer
    untyped = plan_export(SelectionGraphs(model, None, params), None, [middle.name]).estimated_bytes
    with_types = SelectionGraphs(model, None, params, index.table, index.tensor_type)
    known = plan_export(with_types, index, [middle.name]).estimated_bytes
    assert untyped < inferred == known  # the written output's type, without inference
