"""int4 with an accuracy target (int4_search.py, strategies.Int4): the search moves only the weights
that need it to 8 bits and says which and why; the method follows the data given (int4_method.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.quantize.int4_search import role_groups
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.util.errors import OnnxportError


def _on_grid(rng: np.random.Generator, shape: tuple[int, int], scale: float) -> np.ndarray:
    """Weights 4 bits hold exactly: integers -8..7 (both ends in every block of 32 along the first axis)."""
    q = rng.integers(-8, 8, shape).astype(np.float64)
    q[0::32], q[1::32] = -8, 7
    return q * scale


def _one_layer_matters(path: Path) -> Path:
    """An embedding and two MatMuls whose weights 4 bits hold exactly, and one (`/l1/MatMul`) whose
    Gaussian weights 4 bits round: the only one the target can need in 8 bits."""
    rng = np.random.default_rng(0)
    arrays = {"emb": _on_grid(rng, (256, 512), 0.1).T, "w0": _on_grid(rng, (256, 256), 0.02),
              "w1": rng.standard_normal((256, 256)) * 0.06, "w2": _on_grid(rng, (256, 256), 0.02)}
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], name="/emb/Gather"),
             helper.make_node("MatMul", ["x", "w0"], ["h0"], name="/l0/MatMul"),
             helper.make_node("MatMul", ["h0", "w1"], ["h1"], name="/l1/MatMul"),
             helper.make_node("MatMul", ["h1", "w2"], ["y"], name="/l2/MatMul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", T.INT64, ["b", "s"])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["b", "s", 256])],
                              [numpy_helper.from_array(np.ascontiguousarray(a, np.float32), n)
                               for n, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    np.savez(path.with_suffix(".npz"), ids=rng.integers(0, 512, (96, 16)).astype(np.int64))
    return path


def _bits_written(path: Path) -> dict[str, int]:
    nodes = onnx.load(path).graph.node
    return {n.name: next(a.i for a in n.attribute if a.name == "bits") for n in nodes
            if n.op_type in ("MatMulNBits", "GatherBlockQuantized")}


def test_the_search_moves_only_the_weight_that_needs_8_bits_and_says_why(tmp_path):
    model = _one_layer_matters(tmp_path / "m.onnx")
    data = str(model.with_suffix(".npz"))
    whole = quantize(model, tmp_path / "whole.onnx", "int4", QuantizeOptions(accuracy_target=None,
                                                                            validation_inputs=data))
    assert whole.validation.min_cosine < 0.999  # every weight in 4 bits misses the target below
    result = quantize(model, tmp_path / "m.int4.onnx", "int4", QuantizeOptions(accuracy_target=0.999,
                                                                               validation_inputs=data))
    chosen = {"/emb/Gather": 4, "/l0/MatMul": 4, "/l1/MatMul": 8, "/l2/MatMul": 4}
    assert result.search["bits"] == chosen and result.options["bits"] == chosen
    assert _bits_written(tmp_path / "m.int4.onnx") == chosen
    assert result.validation.passed and result.kept_float_nodes == []
    assert [m["group"] for m in result.search["moved"]] == ["/l1/MatMul"]
    assert "int4 search: 3 weight(s) in 4 bits, 1 in 8 bits, 0 in float" in result.notes
    assert any(n.startswith("/l1/MatMul (1 node(s)): 4 bits -> 8 bits, measured alone") for n in result.notes)
    assert result.size_bytes < 0.25 * result.source_size_bytes


def test_no_target_writes_every_candidate_in_4_bits_symmetric_without_zero_points(tmp_path):
    model = _one_layer_matters(tmp_path / "m.onnx")
    result = quantize(model, tmp_path / "q.onnx", "int4", QuantizeOptions(
        accuracy_target=None, symmetric=True, int4_method="rtn", block_size=64,
        validation_inputs=str(model.with_suffix(".npz"))))
    written = onnx.load(tmp_path / "q.onnx").graph.node
    assert set(_bits_written(tmp_path / "q.onnx").values()) == {4}
    assert all(len(n.input) == 3 for n in written if n.op_type == "MatMulNBits")  # weight, scales: no zero points
    assert any("round to nearest, symmetric, blocks of 64" in n for n in result.notes)


def test_calibration_data_chooses_gptq_and_gptq_without_it_is_refused(tmp_path):
    model = _one_layer_matters(tmp_path / "m.onnx")
    data = str(model.with_suffix(".npz"))
    result = quantize(model, tmp_path / "q.onnx", "int4", QuantizeOptions(accuracy_target=None, calibration=data,
                                                                          validation_inputs=data))
    assert result.options["int4_method"] == "gptq"
    assert any("GPTQ-style error compensation on calibration activations (3 weights)" in n for n in result.notes)
    with pytest.raises(OnnxportError, match="GPTQ-style int4 method needs calibration data"):
        quantize(model, tmp_path / "g.onnx", "int4", QuantizeOptions(int4_method="gptq", validation_inputs=data))
    assert not (tmp_path / "g.onnx").exists()


def test_role_groups_put_one_role_of_every_layer_together():
    names = ["/encoder/layer.0/attention/self/value/MatMul", "/encoder/layer.11/attention/self/value/MatMul",
             "/encoder/layer.0/output/dense/MatMul", "/embeddings/word_embeddings/Gather"]
    assert role_groups(names) == {
        "/encoder/layer.*/attention/self/value/MatMul": names[:2],
        "/encoder/layer.*/output/dense/MatMul": [names[2]],
        "/embeddings/word_embeddings/Gather": [names[3]]}


def test_gptq_on_a_model_too_large_to_run_whole_names_that_not_missing_data(tmp_path, monkeypatch):
    from onnxport.core.quantize import bounded
    from tests.core.quantize.test_prep_external import save_external

    save_external(tmp_path / "big.onnx", layers=2, k=256)
    data = tmp_path / "calib.npz"
    np.savez(data, x=np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32))
    monkeypatch.setattr(bounded, "BOUNDED_BYTES", 0)
    options = QuantizeOptions(accuracy_target=None, int4_method="gptq", calibration=str(data), preprocess=False)
    with pytest.raises(OnnxportError, match="too large to run whole") as refused:
        quantize(tmp_path / "big.onnx", tmp_path / "g.onnx", "int4", options)
    assert "needs calibration data" not in str(refused.value)
    assert not (tmp_path / "g.onnx").exists()
    auto = quantize(tmp_path / "big.onnx", tmp_path / "a.onnx", "int4",
                    QuantizeOptions(accuracy_target=None, calibration=str(data), preprocess=False))
    assert auto.options["int4_method"] == "hqq"
