"""A big graph's load checks are made by its types child (it parses the file anyway) while the
open indexes the graph: a crafted file is refused with the same line as `load_graph`'s, and when
the child's verdict is missing or is about other bytes, the checks run in the open itself."""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.graph import shape_types
from onnxport.core.graph.shape_infer import OUT_OF_PROCESS_NODES
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.errors import CorruptFileError
from onnxport.core.workflow import sources
from onnxport.core.workflow.sources import open_sources

NODES = OUT_OF_PROCESS_NODES + 10  # big enough for the child to check it


def _chain(path, nodes: int = NODES) -> bytes:
    graph = onnx.GraphProto(name="chain")
    current = "x"
    for i in range(nodes):
        node = graph.node.add(op_type="Relu", name=f"/layer{i:05d}/Relu")
        node.input.append(current)
        current = f"/layer{i:05d}/Relu_output_0"
        node.output.append(current)
    graph.input.append(helper.make_tensor_value_info("x", T.FLOAT, [1, 4]))
    graph.output.append(helper.make_tensor_value_info(current, T.FLOAT, [1, 4]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString()
    path.write_bytes(data)
    return data


@pytest.fixture
def early(monkeypatch):
    """Every file is big enough for the early types child, and its verdict is waited for however
    loaded the machine (past VERDICT_WAIT_S the checks run here: the wall clock would decide)."""
    monkeypatch.setattr(sources, "EARLY_TYPES_BYTES", 0)
    monkeypatch.setattr(sources, "VERDICT_WAIT_S", 600)


def _refusal(path) -> str:
    with pytest.raises(CorruptFileError) as caught:
        load_graph(path)
    return caught.value.one_line()


def test_a_name_that_is_not_utf8_is_refused_with_load_graphs_line(tmp_path, early):
    path = tmp_path / "m.onnx"
    path.write_bytes(_chain(path).replace(b"/layer00042/Relu", b"/layer\xff0042/Relu"))
    expected = _refusal(path)
    with pytest.raises(CorruptFileError, match=re.escape(expected)):
        open_sources([path], wait_types=False)
    child = shape_types.TypeInference.start(path)
    try:
        verdict = child.verdict()
    finally:
        child.close()
    assert verdict.error == (expected, None)  # the child's own verdict says the same


def test_the_childs_verdict_alone_refuses_a_file(tmp_path, early, monkeypatch):
    """A tensor problem the index does not trip over: only the child's verdict stops the open."""
    path = tmp_path / "m.onnx"
    _chain(path)
    model = onnx.load(path)
    model.graph.initializer.add(name="w", data_type=T.FLOAT, dims=[4])  # declares 4 values, holds none
    onnx.save(model, path)
    monkeypatch.setattr(sources, "check_loaded", lambda *a: pytest.fail("checked in the open"))
    with pytest.raises(CorruptFileError, match=re.escape(_refusal(path))):
        open_sources([path], wait_types=False)


def test_the_childs_verdict_refuses_external_data_outside_the_folder(tmp_path, early):
    path = tmp_path / "m.onnx"
    _chain(path)
    model = onnx.load(path)
    weight = model.graph.initializer.add(name="w", data_type=T.FLOAT, dims=[4])
    weight.data_location = T.EXTERNAL
    weight.external_data.add(key="location", value="../../etc/passwd")
    onnx.save(model, path)
    with pytest.raises(CorruptFileError, match=re.escape(_refusal(path))):
        open_sources([path], wait_types=False)


def test_a_sound_big_file_opens_with_its_types_and_no_check_here(tmp_path, early, monkeypatch):
    path = tmp_path / "m.onnx"
    _chain(path)
    monkeypatch.setattr(sources, "check_loaded", lambda *a: pytest.fail("checked in the open"))
    loaded = open_sources([path], wait_types=True)
    assert loaded.index["/layer00003/Relu_output_0"].dtype == "float32"


def test_a_verdict_about_other_bytes_is_not_trusted(tmp_path, early, monkeypatch):
    """The file changed between the child's read and ours (or the child lied): check here."""
    path = tmp_path / "m.onnx"
    path.write_bytes(_chain(path).replace(b"/layer00042/Relu", b"/layer\xff0042/Relu"))
    monkeypatch.setattr(shape_types.TypeInference, "verdict",
                        lambda self, cancel=None, timeout=None: shape_types.Verdict((0, 0, 0, 0), None))
    with pytest.raises(CorruptFileError, match="is not UTF-8 text"):
        open_sources([path], wait_types=False)


def test_no_verdict_in_time_means_the_checks_run_here(tmp_path, early, monkeypatch):
    path = tmp_path / "m.onnx"
    path.write_bytes(_chain(path).replace(b"/layer00042/Relu", b"/layer\xff0042/Relu"))
    monkeypatch.setattr(shape_types, "TARGET", "tests.core.util.child_functions:never_answers")  # a child that never answers
    monkeypatch.setattr(sources, "VERDICT_WAIT_S", 0.2)
    with pytest.raises(CorruptFileError, match="is not UTF-8 text"):
        open_sources([path], wait_types=False)
