"""A parameter file whose names match but whose dtype does not is refused naming the dtype, not as
a file of another model (issue 36, item 6: a float64 state_dict for `embed` said "fits nothing")."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("as_input", [False, True])  # an initializer, or an ORTModule-style parameter input
def test_embed_of_a_float64_state_dict_names_the_dtype(tmp_path, capsys, as_input):
    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["b", 4])]
    inputs += [helper.make_tensor_value_info("w", T.FLOAT, [4, 4])] if as_input else []
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", T.FLOAT, ["b", 4])],
                              [] if as_input else [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx")
    torch.save({"w": torch.tensor(w, dtype=torch.float64)}, tmp_path / "sd.pt")
    assert main(["embed", str(tmp_path / "g.onnx"), str(tmp_path / "sd.pt"), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "'w' is float64[4, 4] in the checkpoint but the model expects float32[4, 4]" in err and "fits nothing" not in err
    assert not (tmp_path / "out.onnx").exists()
