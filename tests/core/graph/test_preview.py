"""The preview model: what an export keeps, inference form, parameters as weight-free initializers."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.graph.preview import preview_bytes, preview_model
from onnxport.core.util.errors import UnknownOutputError

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights


def test_pruned_preview_of_an_eval_graph():
    model = eval_like_mlp()
    before = model.SerializeToString()
    preview = preview_model(model, ["logits"], parameter_names=mlp_weights())
    assert model.SerializeToString() == before  # the input is untouched
    ops = [n.op_type for n in preview.graph.node]
    assert "SoftmaxCrossEntropyLoss" not in ops and "Softmax" not in ops
    assert "Dropout" not in ops  # inference form, as the export writes it
    assert [o.name for o in preview.graph.output] == ["logits"]
    assert [i.name for i in preview.graph.input] == ["input"]  # labels and parameters gone
    inits = {t.name: t for t in preview.graph.initializer}
    assert set(inits) == set(mlp_weights())  # parameters drawn as weights of their nodes
    assert list(inits["fc1.weight"].dims) == [16, 8] and not inits["fc1.weight"].raw_data
    assert onnx.load_from_string(preview.SerializeToString()).graph.node  # outputs may be untyped: no inference


def test_original_preview_keeps_every_node_and_no_weight_bytes():
    model = forward_mlp(mlp_weights(d_hidden=512))
    preview = preview_model(model, None)
    assert len(preview.graph.node) == len(model.graph.node)
    assert all(not t.raw_data and not t.float_data for t in preview.graph.initializer)
    assert len(preview.SerializeToString()) < len(model.SerializeToString()) / 20


def test_preview_bytes_from_a_file_and_unknown_outputs(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), path)
    data = preview_bytes(path, ["probabilities"])
    assert [o.name for o in onnx.load_from_string(data).graph.output] == ["probabilities"]
    with pytest.raises(UnknownOutputError, match="probabilites"):
        preview_bytes(path, ["probabilites"])


def test_the_bundled_example_previews_the_four_nodes_the_export_writes():
    """ORT's eval graph keeps a Dropout ratio Constant: once Dropout is gone it must go too."""
    from onnxport.core.io.model_io import load_graph
    from onnxport.resources import example_files

    model = load_graph(example_files()[0])
    preview = preview_model(model, ["logits", "probabilities"], ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    assert [n.op_type for n in preview.graph.node] == ["Gemm", "Relu", "Gemm", "Softmax"]


def test_beyond_header_tells_data_from_a_header_without_reading_the_values():
    """Asked of every initializer in a preview: comparing serialized sizes wrote each tensor out
    (upb), 0.1 s per 100 MB under the GIL; asking field by field reads nothing."""
    import tracemalloc

    import numpy as np
    from onnx import numpy_helper

    from onnxport.core.graph.preview import HEADER_FIELDS, beyond_header

    big = numpy_helper.from_array(np.ones(16 << 20, np.float32), "big")  # 64 MB of raw_data
    header = onnx.TensorProto(name="h", data_type=onnx.TensorProto.FLOAT, dims=[3])
    documented = onnx.TensorProto(name="d", data_type=onnx.TensorProto.FLOAT, dims=[3], doc_string="why")
    listed = onnx.TensorProto(name="l", data_type=onnx.TensorProto.FLOAT, dims=[2], float_data=[1.0, 2.0])
    external = onnx.TensorProto(name="e", data_type=onnx.TensorProto.FLOAT, dims=[2])
    external.external_data.add(key="location", value="w.bin")
    tracemalloc.start()
    try:
        assert beyond_header(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert not beyond_header(header) and beyond_header(listed) and beyond_header(external)
    assert beyond_header(documented) and not beyond_header(documented, HEADER_FIELDS | {"doc_string"})
