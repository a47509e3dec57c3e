"""A graph without its weights: every node kept, no weight bytes (what the Preview sends Netron)."""

from __future__ import annotations

import onnx

from onnxport.core.graph.weightless import weightless_bytes, weightless_copy

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights


def test_weightless_keeps_every_node_and_no_weight_bytes():
    model = forward_mlp(mlp_weights(d_hidden=512))
    before = model.SerializeToString()
    drawn = weightless_copy(model)
    assert model.SerializeToString() == before  # the input is untouched
    assert [n.name for n in drawn.graph.node] == [n.name for n in model.graph.node]
    assert all(not t.raw_data and not t.float_data for t in drawn.graph.initializer)
    assert [(t.name, list(t.dims)) for t in drawn.graph.initializer] == [
        (t.name, list(t.dims)) for t in model.graph.initializer]
    assert len(drawn.SerializeToString()) < len(model.SerializeToString()) / 20


def test_weightless_bytes_of_a_file_is_the_model_as_it_is(tmp_path):
    """No inference form, no pruning: the Original view draws the training ops too."""
    path = tmp_path / "m.onnx"
    onnx.save(eval_like_mlp(), path)
    drawn = onnx.load_from_string(weightless_bytes(path))
    assert [n.op_type for n in drawn.graph.node] == [n.op_type for n in eval_like_mlp().graph.node]
    assert "Dropout" in [n.op_type for n in drawn.graph.node]


def test_beyond_header_tells_data_from_a_header_without_reading_the_values():
    """Asked of every initializer in a preview: comparing serialized sizes wrote each tensor out
    (upb), 0.1 s per 100 MB under the GIL; asking field by field reads nothing."""
    import tracemalloc

    import numpy as np
    from onnx import numpy_helper

    from onnxport.core.graph.weightless import HEADER_FIELDS, beyond_header

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
