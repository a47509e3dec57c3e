"""The static search by units: each set of float nodes runs once, and it stops at the cheapest unit
that meets the target alone (a tiny CNN with an outlier channel, real ORT, int8 path pinned)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnxport.core.quantize import qdq_switch
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.quantize import quantize


def outlier_cnn(boost: float = 100.0, shrink: float = 0.01, middle: int = 8, kernel: int = 1) -> onnx.ModelProto:
    """conv1 makes one channel `boost` x the others (one uint8 scale cannot hold both), conv2 scales
    it back down by `shrink`, conv3 (the heavy one) mixes: quantized whole, the small channels are lost."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    w1[0] *= boost
    w2 = rng.normal(0, 0.3, (middle, 8, kernel, kernel)).astype(np.float32)
    w2[:, 0] *= shrink
    w3 = rng.normal(0, 0.1, (64, middle, 3 // kernel, 3 // kernel)).astype(np.float32)
    inits = [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))]
    pad2, pad3 = [kernel // 2] * 4, [(3 // kernel) // 2] * 4
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="conv2", pads=pad2),
             helper.make_node("Conv", ["b", "w3"], ["y"], name="conv3", pads=pad3)]
    graph = helper.make_graph(nodes, "outlier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _calibration() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(48)]


def _static(src, dst):
    return quantize(src, dst, "static",
                    QuantizeOptions(calibration=_calibration(), int8_path="avx2", op_types=["Conv"], per_channel=True))


def switched_runs(monkeypatch) -> list[frozenset]:
    """The sets of float nodes the search's switched runs measure, in order (the real runs go on)."""
    ran: list[frozenset] = []
    original = qdq_switch.QdqRunner.run

    def spy(self, keep_float):
        ran.append(frozenset(keep_float))
        return original(self, keep_float)

    monkeypatch.setattr(qdq_switch.QdqRunner, "run", spy)
    return ran


def test_each_float_set_runs_once_and_the_cheapest_passing_unit_ends_the_search(tmp_path, monkeypatch):
    src = tmp_path / "cnn.onnx"
    onnx.save_model(outlier_cnn(), str(src))
    ran = switched_runs(monkeypatch)
    result = _static(src, tmp_path / "out.onnx")
    search = result.search
    assert search["base_min_cosine"] < 0.99 and result.validation.passed
    assert len(ran) == len(set(ran)) == search["evaluations"]  # no set of float nodes measured twice
    assert search["reused"] >= 1  # the search's first trial is the unit it measured
    # nothing float: the first attempt's own check, not a switched run; units by share: {conv1},
    # {conv1, conv2} (conv2 and the producer of its input) meets the target, so {conv2, conv3}
    # (the heavy one) is never measured
    assert ran == [frozenset({"conv1"}), frozenset({"conv1", "conv2"})]
    assert set(result.kept_float_nodes) == {"conv1", "conv2"}


def _weight_source(model: onnx.ModelProto, node: str) -> tuple[str, ...]:
    """How `node` gets its weight: ('initializer', type) or the ops from the stored tensor to it."""
    conv = next(n for n in model.graph.node if n.name == node)
    inits = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    name, chain = conv.input[1], []
    while name not in inits:
        step = producer[name]
        chain.insert(0, step.op_type)
        name = step.input[0]
    return ("initializer", inits[name].data_type, *chain)


def test_a_node_kept_in_float_keeps_its_big_weight_in_int8(tmp_path):
    """conv2 (9,216 weights) must compute in float (its input's outlier channel), but its weight
    survives int8: stored so, Cast and scaled in front of it (ORT folds both), the model checked again."""
    src = tmp_path / "cnn.onnx"
    onnx.save_model(outlier_cnn(boost=50.0, shrink=0.05, middle=128, kernel=3), str(src))
    result = _static(src, tmp_path / "out.onnx")
    assert set(result.kept_float_nodes) == {"conv1", "conv2"} and result.validation.passed
    assert result.search["int8_weights"] == 1
    written = onnx.load(str(result.path))
    assert _weight_source(written, "conv2") == ("initializer", TensorProto.INT8, "Cast", "Mul")
    so = ort.SessionOptions()  # ONNX Runtime folds them: conv2 runs on a float initializer, as before
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ort.InferenceSession(str(result.path), so, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    assert _weight_source(optimized, "conv2")[:2] == ("initializer", TensorProto.FLOAT)
    assert result.size_bytes < 0.4 * result.source_size_bytes  # conv2's 36 KB as 9 KB


def test_int8_weights_that_miss_the_target_are_not_kept(tmp_path):
    """With conv2's outlier column at 0.01x, its int8 weights cost the target: the float file stays."""
    src = tmp_path / "cnn.onnx"
    onnx.save_model(outlier_cnn(boost=100.0, shrink=0.01, middle=128, kernel=3), str(src))
    result = _static(src, tmp_path / "out.onnx")
    assert set(result.kept_float_nodes) == {"conv1", "conv2"} and result.validation.passed
    assert "int8_weights" not in result.search
    assert _weight_source(onnx.load(str(result.path)), "conv2")[:2] == ("initializer", TensorProto.FLOAT)


def test_each_attempt_file_is_loaded_once(tmp_path, monkeypatch):
    """The checker's session is the load check: attempt_file does not open one more per attempt."""
    from onnxport.core.quantize import attempt_check, search

    src = tmp_path / "cnn.onnx"
    onnx.save_model(outlier_cnn(), str(src))
    opened: list[str] = []
    for module in (search, attempt_check):
        original = module.session

        def spy(model, *args, _original=original, **kwargs):
            opened.append(Path(model).name if isinstance(model, (str, Path)) else "<model>")
            return _original(model, *args, **kwargs)

        monkeypatch.setattr(module, "session", spy)
    result = _static(src, tmp_path / "out.onnx")
    assert result.validation.passed and result.kept_float_nodes
    assert opened.count("out.onnx") == len(result.attempts)  # one session per real attempt, the checker's
