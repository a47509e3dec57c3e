"""Sparse tensors: ORT's rules and a bounded dense size, checked on load (issue 27, items 5 and 12)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.export.export import export_model
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.errors import CorruptFileError

from ..crafted_files import run_bounded


def sparse_model(values, indices, dims, *, as_constant: bool = False, index_type=np.int64,
                 shape: list[int] | None = None) -> onnx.ModelProto:
    vals = numpy_helper.from_array(np.asarray(values, np.float32), "S")
    idx = numpy_helper.from_array(np.asarray(indices, index_type), "S_indices")
    sparse = helper.make_sparse_tensor(vals, idx, dims)
    if as_constant:  # a Constant's sparse_value: an attribute, not an initializer
        nodes = [helper.make_node("Constant", [], ["S"], sparse_value=sparse), helper.make_node("Identity", ["S"], ["y"])]
        graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    else:
        graph = helper.make_graph([helper.make_node("Identity", ["S"], ["y"])], "g", [],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                                  sparse_initializer=[sparse])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


REFUSED = {  # case -> (values, indices, dense dims, what the one line says); ORT refuses each on load
    "index out of bounds": ([1, 2], [0, 9], [2, 2], "out of bounds"),
    "negative index": ([1, 2], [-1, 1], [2, 2], "out of bounds"),
    "coordinate out of bounds": ([1, 2], [[0, 0], [1, 5]], [2, 2], "out of bounds"),
    "values not rank 1": ([[1, 2]], [0, 3], [2, 2], "rank 1"),
    "more values than indices": ([1, 2, 3], [0, 3], [2, 2], "do not fit"),
    "coordinates of another rank": ([1, 2], [[0, 0, 0], [1, 1, 1]], [2, 2], "do not fit"),
    "negative dense dim": ([1], [0], [-2, 2], "negative dimension"),
    "dense bomb": ([1], [0], [50000, 50000], "dense form takes 9.3 GiB"),
}


def _ort_refuses(model: onnx.ModelProto) -> bool:
    if "dense bomb" in model.doc_string:
        return True  # not loaded here: it would allocate 10 GB
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - ORT's own exception types
        return True
    return False


@pytest.mark.parametrize("as_constant", [False, True])
@pytest.mark.parametrize("case", list(REFUSED))
def test_sparse_tensors_ort_refuses_are_refused_on_load_and_never_exported(tmp_path, case, as_constant):
    values, indices, dims, says = REFUSED[case]
    model = sparse_model(values, indices, dims, as_constant=as_constant)
    model.doc_string = case
    assert _ort_refuses(model)
    path = tmp_path / "sparse.onnx"
    onnx.save(model, path)
    with pytest.raises(CorruptFileError, match=says) as info:
        load_graph(path)
    assert "\n" not in str(info.value) and "sparse tensor 'S'" in str(info.value)
    with pytest.raises(CorruptFileError, match=says):
        export_model(path, tmp_path / "out.onnx", ["y"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sparse.onnx"]


@pytest.mark.parametrize("index_type", [np.int64, np.int32])
@pytest.mark.parametrize("indices", [[0, 3], [[0, 0], [1, 1]], [3, 0]])
def test_sparse_tensors_ort_accepts_still_export_and_run(tmp_path, indices, index_type):
    path = tmp_path / "sparse.onnx"
    onnx.save(sparse_model([1, 2], indices, [2, 2], index_type=index_type, shape=[2, 2]), path)
    load_graph(path)
    out = tmp_path / "out.onnx"
    export_model(path, out, ["y"])
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {})[0]
    expected = np.zeros(4, np.float32)
    flat = np.asarray(indices).reshape(2, -1)
    positions = flat[:, 0] * 2 + flat[:, 1] if flat.shape[1] == 2 else flat[:, 0]
    expected[positions] = [1, 2]
    np.testing.assert_array_equal(got.reshape(-1), expected)


def test_the_dense_budget_grows_with_the_file_and_counts_every_sparse_tensor(tmp_path):
    # 3 x 100 MiB dense forms from a tiny file: each alone fits the 256 MiB floor, together they do not
    dims = [25 << 20]
    sparse = [helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.float32), f"S{i}"),
                                        numpy_helper.from_array(np.zeros(1, np.int64), f"S{i}_i"), dims)
              for i in range(3)]
    graph = helper.make_graph([helper.make_node("Sum", ["S0", "S1", "S2"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], sparse_initializer=sparse)
    path = tmp_path / "three.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    with pytest.raises(CorruptFileError, match="sparse tensor 'S2'.*all sparse tensors: 300.0 MiB"):
        load_graph(path)


def test_bench_of_a_sparse_bomb_exits_2_in_bounded_memory(tmp_path):
    path = tmp_path / "bomb.onnx"
    onnx.save(sparse_model([1], [0], [50000, 50000]), path)
    code = ("import sys\nfrom onnxport.core.cli import main\nsys.exit(main(['bench', sys.argv[1]]))")
    proc = run_bounded(code, limit_gb=4.0, args=["-c", code, str(path)])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "dense form" in proc.stderr


@pytest.mark.parametrize("case", ["string values", "uint8 indices", "rank-0 indices, no values"])
def test_types_and_ranks_ort_refuses(tmp_path, case):
    values = numpy_helper.from_array(np.zeros(0, np.float32), "S")
    indices = numpy_helper.from_array(np.array(0, np.int64), "S_indices")
    if case == "string values":
        values = helper.make_tensor("S", TensorProto.STRING, [1], [b"a"])
        indices = numpy_helper.from_array(np.array([0], np.int64), "S_indices")
    elif case == "uint8 indices":
        values = numpy_helper.from_array(np.ones(1, np.float32), "S")
        indices = numpy_helper.from_array(np.array([0], np.uint8), "S_indices")
    graph = helper.make_graph([helper.make_node("Identity", ["S"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", values.data_type, None)],
                              sparse_initializer=[helper.make_sparse_tensor(values, indices, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert _ort_refuses(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(CorruptFileError, match="sparse tensor 'S'"):
        load_graph(path)
