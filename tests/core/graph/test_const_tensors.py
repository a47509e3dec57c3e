"""Constant tensors (graph.const_tensors): every source reads back the values it was made from.

Sources: an inline initializer (raw bytes or typed fields), an initializer in external data and a
parameter's file span (both read from the file), a parameter's loader and a numpy array (computed).
Read back twice: by `values()`, and from the model the streaming writer makes of them.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.writer import EXTERNAL_THRESHOLD, write_model
from onnxport.core.graph.const_tensors import ConstTensor, from_array, from_initializer, from_param
from onnxport.core.io.parameter_set import FileSpan, ParamTensor
from onnxport.core.util.errors import CorruptFileError

RNG = np.random.default_rng(3)
# each over the writer's EXTERNAL_THRESHOLD (1 KiB), so with external data every one goes there
A = RNG.standard_normal((16, 20)).astype(np.float32)
B = RNG.integers(-1000, 1000, (64, 4)).astype(np.int64)
H = RNG.standard_normal(700).astype(np.float16)


def span_file(tmp_path, arrays: dict[str, np.ndarray], lead: bytes = b"HEADER--") -> dict[str, FileSpan]:
    """Write the arrays' little-endian bytes after `lead` into one file; their spans."""
    path = tmp_path / "blob.bin"
    spans, data = {}, bytearray(lead)
    for name, a in arrays.items():
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        spans[name] = FileSpan(path, len(data), len(raw))
        data += raw
    path.write_bytes(bytes(data))
    return spans


def sources(tmp_path) -> dict[str, tuple[ConstTensor, np.ndarray]]:
    """One ConstTensor per kind of source, with the array it must read back as."""
    typed = helper.make_tensor("typed", T.FLOAT, A.shape, A.reshape(-1).tolist())  # float_data, not raw
    assert not typed.raw_data
    ext = numpy_helper.from_array(B, "ext")
    spans = span_file(tmp_path, {"ext": B, "param_span": A, "half_span": H})
    onnx.external_data_helper.set_external_data(ext, "blob.bin", offset=spans["ext"].offset,
                                                length=spans["ext"].length)
    ext.ClearField("raw_data")
    ext.data_location = T.EXTERNAL
    param = ParamTensor("param_loader", T.INT64, B.shape, loader=B.copy)
    return {
        "raw": (from_initializer(numpy_helper.from_array(A, "raw"), tmp_path), A),
        "typed": (from_initializer(typed, tmp_path), A),
        "ext": (from_initializer(ext, tmp_path), B),
        "param_span": (from_param("param_span", ParamTensor("param_span", T.FLOAT, A.shape, loader=None,
                                                             span=spans["param_span"])), A),
        "half_span": (from_param("half_span", ParamTensor("half_span", T.FLOAT16, H.shape, loader=None,
                                                           span=spans["half_span"])), H),
        "param_loader": (from_param("param_loader", param), B),
        "array": (from_array("array", H), H),
    }


def test_each_source_reads_back_equal(tmp_path):
    got = sources(tmp_path)
    kinds = {name: ("span" if c.span else "proto" if c.proto is not None else "compute") for name, (c, _) in got.items()}
    assert kinds == {"raw": "proto", "typed": "proto", "ext": "span", "param_span": "span",
                     "half_span": "span", "param_loader": "compute", "array": "compute"}
    for name, (c, want) in got.items():
        values = np.asarray(c.values())
        assert values.dtype == want.dtype and values.shape == want.shape, name
        np.testing.assert_array_equal(values, want, err_msg=name)
        assert c.shape == want.shape and c.nbytes == want.nbytes, name
        assert c.elem_type == helper.np_dtype_to_tensor_dtype(want.dtype), name


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external-data"])
def test_the_writer_writes_each_source_as_it_reads(tmp_path, external):
    got = sources(tmp_path)
    assert min(want.nbytes for _, want in got.values()) >= EXTERNAL_THRESHOLD
    names = list(got)
    nodes = [helper.make_node("Identity", [n], [f"out_{n}"], name=f"id_{n}") for n in names]
    outputs = [helper.make_tensor_value_info(f"out_{n}", T.UNDEFINED, None) for n in names]
    skeleton = helper.make_model(helper.make_graph(nodes, "g", [], outputs),
                                 opset_imports=[helper.make_opsetid("", 17)])
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    write_model(skeleton, [c for c, _ in got.values()], out, external_data=external)
    stored = onnx.load(out, load_external_data=False).graph.initializer
    assert {t.data_location == T.EXTERNAL for t in stored} == {external}
    model = onnx.load(out)  # external data resolved against out's folder
    written = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert list(written) == names
    for name, (_, want) in got.items():
        assert written[name].dtype == want.dtype, name
        np.testing.assert_array_equal(written[name], want, err_msg=name)


def test_bad_sources_are_one_line_errors(tmp_path):
    spans = span_file(tmp_path, {"a": A})
    short = FileSpan(spans["a"].path, spans["a"].offset + 8, spans["a"].length)  # runs past the end
    with pytest.raises(CorruptFileError, match="truncated"):
        ConstTensor("a", T.FLOAT, A.shape, A.nbytes, span=short).values()
    lying = onnx.TensorProto(name="lying", data_type=T.FLOAT, dims=[4], raw_data=b"\0" * 8)
    with pytest.raises(CorruptFileError, match="'lying': its data does not fit its dims"):
        from_initializer(lying, tmp_path).values()
    with pytest.raises(CorruptFileError, match="has no data"):
        ConstTensor("empty", T.FLOAT, (1,), 4).values()
