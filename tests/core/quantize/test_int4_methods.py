"""Block quantization of weights (blockwise.py, gptq.py, weights.py) and the bytes ONNX Runtime reads
(nbits_pack.py, int4.write_weight_only): every block size and both zero-point kinds run in ORT as
the integers say; HQQ-style scales never do worse than round-to-nearest; GPTQ-style compensation
lowers the layer's output error on the activations it was given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.quantize.blockwise import block_error, block_weights, rtn, to_blocks
from onnxport.core.quantize.int4 import NbitsPlan, write_weight_only
from onnxport.core.quantize.nbits_plan import GATHER, MATMUL, weight_uses
from onnxport.core.quantize.weights import WeightMethod, quantize_weight


def _matmul_and_embedding(path: Path, k: int = 256, n: int = 96, vocab: int = 300) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    arrays = {"emb": rng.standard_normal((vocab, k)).astype(np.float32),
              "w": (rng.standard_normal((k, n)) * np.linspace(0.2, 3, k)[:, None]).astype(np.float32)}
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], name="/emb/Gather"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", T.INT64, ["b", "s"])],
                              [helper.make_tensor_value_info("x", T.FLOAT, ["b", "s", k]),
                               helper.make_tensor_value_info("y", T.FLOAT, ["b", "s", n])],
                              [numpy_helper.from_array(a, name) for name, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return arrays


def _run(path: Path, ids: np.ndarray) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"ids": ids})


@pytest.mark.parametrize("block_size", [32, 64, 128, 256])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [4, 8])
def test_written_weights_compute_what_their_integers_say(tmp_path, block_size, symmetric, bits):
    src, dst = tmp_path / "m.onnx", tmp_path / "q.onnx"
    arrays = _matmul_and_embedding(src)
    method = WeightMethod("rtn", symmetric)
    plan = NbitsPlan({"/fc/MatMul": bits, "/emb/Gather": bits}, block_size, method, accuracy_level={bits: 0},
                     min_elements=1)
    write_weight_only(src, dst, plan, big=False)
    written = onnx.load(dst)
    assert [n.op_type for n in written.graph.node] == ["GatherBlockQuantized", "MatMulNBits"]
    assert {t.name for t in written.graph.initializer}.isdisjoint({"emb", "w"})  # the float weights are gone
    ids = np.array([[0, 7, 299, 150]], np.int64)
    x, y = _run(dst, ids)
    table = quantize_weight(arrays["emb"].T, bits, block_size, method).dequantize().T
    np.testing.assert_allclose(x, table[ids], rtol=1e-6, atol=1e-6)
    weight = quantize_weight(arrays["w"], bits, block_size, method).dequantize()
    np.testing.assert_allclose(y, x @ weight, rtol=1e-4, atol=1e-3)
    assert not np.allclose(weight, arrays["w"], atol=1e-6)  # it did quantize


@pytest.mark.parametrize("block_size", [32, 128])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_hqq_scales_never_do_worse_than_round_to_nearest(block_size, symmetric, weighted):
    """Per block, in the error it minimises (weighted by the input channels' importance when given),
    computed here directly from the integers it chose; an all-zero column stays exact."""
    rng = np.random.default_rng(2)
    w = rng.standard_t(4, (512, 64)).astype(np.float32)  # heavy tails: the block's range is a poor scale
    w[:, 5] = 0.0
    importance = rng.gamma(0.5, 2.0, 512).astype(np.float32) if weighted else None
    blocks = to_blocks(w, block_size)
    weights = block_weights(importance, blocks.shape)
    plain = quantize_weight(w, 4, block_size, WeightMethod("rtn", symmetric))
    tuned = quantize_weight(w, 4, block_size, WeightMethod("hqq", symmetric), importance=importance)
    e_rtn = block_error(blocks, plain.q, plain.scales, plain.zero_points.astype(np.float32), weights)
    e_hqq = block_error(blocks, tuned.q, tuned.scales, tuned.zero_points.astype(np.float32), weights)
    assert (e_hqq <= e_rtn * (1 + 1e-5) + 1e-12).all()
    assert e_hqq.sum() < 0.96 * e_rtn.sum()
    assert not tuned.dequantize()[:, 5].any()


def test_gptq_with_calibration_activations_lowers_the_output_error():
    rng = np.random.default_rng(3)
    k, n, rows = 256, 64, 2048
    x = (rng.standard_normal((rows, 16)) @ rng.standard_normal((16, k)) + 0.1 * rng.standard_normal((rows, k)))
    w = rng.standard_normal((k, n)).astype(np.float32)
    hessian = x.T @ x / rows
    errors = {}
    for name in ("rtn", "hqq", "gptq"):
        qz = quantize_weight(w, 4, 32, WeightMethod(name), hessian)
        errors[name] = float(np.square(x @ (qz.dequantize() - w)).mean())
    assert errors["gptq"] < 0.7 * min(errors["rtn"], errors["hqq"]), errors
    without = quantize_weight(w, 4, 32, WeightMethod("gptq"))  # no data: HQQ-style scales
    np.testing.assert_array_equal(without.q, quantize_weight(w, 4, 32, WeightMethod("hqq")).q)


def test_symmetric_rtn_maps_the_largest_magnitude_to_the_lowest_level():
    blocks = np.array([[[1.0, -4.0, 2.0, 0.5]]], np.float32)
    qz = rtn(blocks, 4, symmetric=True)
    assert qz.q[0, 0, 1] == 0 and qz.zero_points[0, 0] == 8
    np.testing.assert_allclose(qz.dequantize()[1, 0], -4.0)


def test_candidates_are_matmuls_and_embedding_gathers_wide_enough_for_the_block(tmp_path):
    _matmul_and_embedding(tmp_path / "m.onnx", k=64)
    model = onnx.load(tmp_path / "m.onnx")
    uses = weight_uses(model, 64, 1)
    assert [(u.node, u.op, u.k, u.n) for u in uses] == [("/emb/Gather", GATHER, 64, 300), ("/fc/MatMul", MATMUL, 64, 96)]
    assert weight_uses(model, 128, 1) == []  # K (D) below the block: nothing
