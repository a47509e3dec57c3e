"""A model's graph without its big inline weights (io/light_read.py): what validation and the
benchmark read, ONNX Runtime reading the weights itself."""

from __future__ import annotations

import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.io.light_read import load_light_graph
from onnxport.core.io.model_io import copy_without_initializers, load_graph, strip_weights
from onnxport.core.util.errors import CorruptFileError, OnnxportError


def _model(big: int = 256) -> onnx.ModelProto:
    """Two big inline weights (256x256 float32: 256 KB each), a small one, a Constant node."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((big, big)).astype(np.float32), "w1")
    w1.doc_string = "the first layer"
    w2 = numpy_helper.from_array(rng.standard_normal((big, big)).astype(np.float16), "w2")
    shape = numpy_helper.from_array(np.array([1, big], np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="/l0/MatMul"),
             helper.make_node("Cast", ["w2"], ["w2f"], to=T.FLOAT),
             helper.make_node("MatMul", ["h", "w2f"], ["y0"], name="/l1/MatMul"),
             helper.make_node("Reshape", ["y0", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, big])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, big])], [w1, shape, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _header(t: onnx.TensorProto) -> tuple:
    return t.name, list(t.dims), t.data_type, t.doc_string, t.HasField("raw_data")


def test_the_graph_is_the_stripped_one_and_the_weights_are_not_read(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    tracemalloc.start()
    light = load_light_graph(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 128 * 1024  # the two weights are 384 KB: none of it copied
    expected = strip_weights(load_graph(path))
    assert copy_without_initializers(light) == copy_without_initializers(expected)
    assert [_header(t) for t in light.graph.initializer] == [_header(t) for t in expected.graph.initializer]
    assert [t.name for t in light.graph.initializer] == ["w1", "shape", "w2"]  # in their places
    assert light.graph.initializer[1] == expected.graph.initializer[1]  # the small one whole
    assert not light.graph.initializer[0].HasField("raw_data") and light.graph.initializer[0].doc_string


def test_a_big_tensor_that_does_not_hold_what_it_declares_is_refused_as_load_graph_refuses_it(tmp_path):
    model = _model()
    w1 = model.graph.initializer[0]
    w1.raw_data = w1.raw_data[:-4]  # one float short
    onnx.save(model, tmp_path / "short.onnx")
    with pytest.raises(CorruptFileError, match="declare 262144 bytes but the tensor holds 262140"):
        load_graph(tmp_path / "short.onnx")
    with pytest.raises(CorruptFileError, match="declare 262144 bytes but the tensor holds 262140"):
        load_light_graph(tmp_path / "short.onnx")


def test_a_stripped_tensor_s_name_must_be_utf8(tmp_path):
    data = _model().SerializeToString()
    assert data.count(b"\x42\x02w2") == 1  # TensorProto.name (field 8) of the stripped w2, nothing else
    data = data.replace(b"\x42\x02w2", b"\x42\x02\xff2")
    (tmp_path / "m.onnx").write_bytes(data)
    with pytest.raises(CorruptFileError, match=r"its name b'\\xff2' is not UTF-8 text"):
        load_light_graph(tmp_path / "m.onnx")


def test_external_weights_and_what_is_not_a_model_are_load_graph_s(tmp_path):
    path = tmp_path / "ext.onnx"
    onnx.save(_model(), path, save_as_external_data=True, location="ext.bin", size_threshold=1024)
    assert load_light_graph(path) == load_graph(path)  # nothing inline to strip: the references stay
    (tmp_path / "text.onnx").write_bytes(b"not a model at all, not even close" * 100)
    with pytest.raises(OnnxportError) as light:
        load_light_graph(tmp_path / "text.onnx")
    with pytest.raises(OnnxportError) as usual:
        load_graph(tmp_path / "text.onnx")
    assert str(light.value) == str(usual.value)
    with pytest.raises(OnnxportError, match="no such file"):
        load_light_graph(tmp_path / "missing.onnx")


def test_a_file_the_walk_does_not_understand_is_loaded_whole_then_stripped(tmp_path, monkeypatch):
    from onnxport.core.io import light_read
    from onnxport.core.io.chunked_parse import Unknown

    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    walked = load_light_graph(path)

    def puzzled(*_args):
        raise Unknown()

    monkeypatch.setattr(light_read, "_walk", puzzled)
    assert load_light_graph(path) == walked
