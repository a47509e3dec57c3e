"""A model with external data under the big-model size quantizes: ONNX Runtime's optimized model
named the source's data file, which is not beside the pre-processed copy in the work folder, and
the run was refused "external data file 'big.onnx.data' not found next to the model" (issue 40)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.quantize.prep import preprocess
from onnxport.core.util.data_files import data_location, external_tensors


def save_external(path, layers: int = 3, k: int = 256) -> None:
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((0.05 * rng.standard_normal((k, k))).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"/layers.{i}/MatMul"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"/layers.{i}/Relu")]
        x = f"r{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["b", k])],
                              [helper.make_tensor_value_info(x, T.FLOAT, ["b", k])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(path), save_as_external_data=True, location="big.onnx.data", size_threshold=0)


def test_preprocess_names_only_data_beside_its_output(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "work").mkdir()
    save_external(tmp_path / "src" / "big.onnx")
    dst = tmp_path / "work" / "prepared.onnx"
    preprocess(tmp_path / "src" / "big.onnx", dst)
    model = onnx.load_model(str(dst), load_external_data=False)
    for name in {data_location(t) for t in external_tensors(model.graph)}:
        assert (dst.parent / name).is_file(), name
    onnx.load_model(str(dst))  # every tensor's data found beside it


@pytest.mark.parametrize("mode", ["dynamic", "int4"])
def test_quantize_a_small_external_data_model(tmp_path, mode, capsys):
    save_external(tmp_path / "big.onnx")
    out = tmp_path / f"q_{mode}.onnx"
    code = main(["quantize", str(tmp_path / "big.onnx"), "-o", str(out), "--mode", mode, "--no-target", "-q"])
    assert code == 0, capsys.readouterr().err
    onnx.checker.check_model(str(out), full_check=True)
