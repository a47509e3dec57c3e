"""Models of IR version 3 (before IR 4 every initializer must also be a graph input) export to
models `onnx.checker` accepts: the initializers the export keeps or makes by folding are
declared as inputs too (pytorch-converted ConvTranspose2d/Conv/Linear and the light models of
ONNX's backend tests failed with "... in initializer but not in graph input"; issue 26, item 11)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main


def ir3_model() -> onnx.ModelProto:
    """IR 3, opset 9: y = Relu(x @ (W * 2) + b), W and b initializers listed as inputs; W * 2 folds."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    two = np.array(2.0, np.float32)
    nodes = [helper.make_node("Mul", ["W", "two"], ["W2"], name="scale"),
             helper.make_node("MatMul", ["x", "W2"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["pre"], name="add"),
             helper.make_node("Relu", ["pre"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(two, "two")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    return model


def _run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_an_ir3_export_declares_its_initializers_as_inputs(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(ir3_model(), str(src))
    onnx.checker.check_model(str(src), full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    for outputs in ("y", "pre"):  # the graph output, and a mid tensor
        out = tmp_path / f"{outputs}.onnx"
        assert main(["export", str(src), "--outputs", outputs, "-o", str(out), "-q"]) == 0, capsys.readouterr().err
        written = onnx.load(str(out))
        assert written.ir_version == 3
        onnx.checker.check_model(written, full_check=True)
        assert {t.name for t in written.graph.initializer} <= {i.name for i in written.graph.input}
    np.testing.assert_allclose(_run(tmp_path / "y.onnx", x), _run(src, x), rtol=1e-6)
