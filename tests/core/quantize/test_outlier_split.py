"""Outlier channels split off into float MatMuls (outlier_split.py, outlier_plan.py): exact in float,
and what makes the dynamic mode's first attempt meet its target where whole MatMuls stayed float."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.outlier_plan import channel_maxima, split_for_dynamic
from onnxport.core.quantize.outlier_split import SHIFT, SUFFIX, chosen_channels, float_parts, split_outliers
from onnxport.core.quantize.quantize import quantize
from onnxport.core.quantize.smooth import RESCALED_BY
from onnxport.core.quantize.weight_edits import RESCALED

D, HIDDEN = 64, 128
LN_OUTLIER, FFN_OUTLIER = 5, 17  # the planted channels


def block_model(seed: int = 0) -> onnx.ModelProto:
    """A post-LN transformer block's shape: h = LayerNorm(x) (gamma[LN_OUTLIER] large) read by two
    weight MatMuls and a residual Add (output r); u = Relu(v) * c (c a constant vector), whose
    channel FFN_OUTLIER fires rarely but large, read only by the output projection, whose weight
    row FFN_OUTLIER is large too; y = LayerNorm(u @ W2 + b2), per token as a transformer's is."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    gamma = np.ones(D, np.float32)
    gamma[LN_OUTLIER] = 80.0
    wv = w(D, HIDDEN, scale=D ** -0.5)
    wv[LN_OUTLIER] /= 80.0
    bv = w(HIDDEN, scale=0.1)
    bv[FFN_OUTLIER] = -2.0  # fires on a few tokens only
    c = np.full(HIDDEN, 0.5, np.float32)
    c[FFN_OUTLIER] = 12.0
    w2 = w(HIDDEN, D, scale=HIDDEN ** -0.5)
    w2[FFN_OUTLIER] *= 12.0
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("gamma", gamma), ("beta", w(D, scale=0.1)), ("Wq", w(D, D, scale=D ** -0.5)), ("bq", w(D, scale=0.1)),
        ("Wv", wv), ("bv", bv), ("c", c), ("W2", w2), ("b2", w(D, scale=0.1)), ("ones", np.ones(D, np.float32)),
        ("zeros", np.zeros(D, np.float32)))]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["h"], name="ln", axis=-1),
        helper.make_node("MatMul", ["h", "Wq"], ["q0"], name="q/MatMul"),
        helper.make_node("Add", ["q0", "bq"], ["q"], name="q/Add"),
        helper.make_node("Add", ["h", "q"], ["r"], name="residual"),
        helper.make_node("MatMul", ["h", "Wv"], ["v0"], name="v/MatMul"),
        helper.make_node("Add", ["v0", "bv"], ["v"], name="v/Add"),
        helper.make_node("Relu", ["v"], ["a"], name="act"),
        helper.make_node("Mul", ["a", "c"], ["u"], name="scale"),
        helper.make_node("MatMul", ["u", "W2"], ["y0"], name="out/MatMul"),
        helper.make_node("Add", ["y0", "b2"], ["y1"], name="out/Add"),
        helper.make_node("LayerNormalization", ["y1", "ones", "zeros"], ["y"], name="out/ln", axis=-1),
    ]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D])],
                              [helper.make_tensor_value_info(n, T.FLOAT, ["batch", "seq", D]) for n in "yr"],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def feeds(count: int = 4, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((4, 16, D)).astype(np.float32)} for _ in range(count)]


def _run(model: onnx.ModelProto, feed: dict) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.concatenate([o.reshape(-1) for o in sess.run(None, feed)])


def _split(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict, list[str]]:
    groups = chosen_channels(model, channel_maxima(model, feeds()))
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    return rewritten, groups, float_parts(split_outliers(rewritten, groups))


def test_the_planted_channels_are_chosen_and_the_rewrite_is_exact_in_float():
    model = block_model()
    rewritten, groups, added = _split(model)
    assert groups["h"].channels == [LN_OUTLIER] and sorted(groups["h"].matmuls) == ["q/MatMul", "v/MatMul"]
    assert FFN_OUTLIER in groups["u"].channels and groups["u"].matmuls == ["out/MatMul"]
    assert sorted(added) == sorted(f"{n}{SUFFIX}" for n in ("q/MatMul", "v/MatMul", "out/MatMul"))
    onnx.checker.check_model(rewritten, full_check=True)
    for feed in feeds(3, seed=7):  # inputs the maxima never saw
        want, got = _run(model, feed), _run(rewritten, feed)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    weights = {t.name: numpy_helper.to_array(t) for t in rewritten.graph.initializer}
    assert not weights["Wq"][LN_OUTLIER].any() and not weights["W2"][FFN_OUTLIER].any()  # the int8 part lacks them


def test_a_shared_activation_gets_one_mask_and_its_other_readers_keep_it_whole():
    rewritten, _, _ = _split(block_model())
    nodes = {n.name: n for n in rewritten.graph.node}
    masks = [n for n in rewritten.graph.node if n.op_type == "Mul" and n.input[0] == "h"]
    assert len(masks) == 1  # one Mul for both MatMuls reading h
    assert nodes["q/MatMul"].input[0] == nodes["v/MatMul"].input[0] == masks[0].output[0]
    assert list(nodes["residual"].input) == ["h", "q"]  # the residual still reads the whole h


def test_a_constant_vector_factor_takes_the_mask():
    rewritten, _, _ = _split(block_model())
    nodes = {n.name: n for n in rewritten.graph.node}
    weights = {t.name: numpy_helper.to_array(t) for t in rewritten.graph.initializer}
    factor = weights[nodes["scale"].input[1]]
    assert factor[FFN_OUTLIER] == 0.0 and factor[0] == 0.5  # u's outlier zeroed where u is made
    assert nodes["out/MatMul"].input[0] == "u" + RESCALED  # no extra Mul for it (u renamed: its values changed)
    gather = next(n for n in rewritten.graph.node if n.op_type == "Gather" and n.input[0] == "a")
    assert gather is not None  # the float part reads the unscaled activation (its rows carry c)


def test_an_activation_made_from_a_bias_add_is_zeroed_by_shifting_its_bias():
    """u = Relu(v0 + bv) * 0.5 (a scalar, like GELU's): bv[j] - SHIFT zeroes u_j, no Mul over u;
    the float part recomputes Relu(.) * 0.5 from the shifted v's channel j."""
    model = block_model()
    for t in model.graph.initializer:
        if t.name == "c":
            t.CopyFrom(numpy_helper.from_array(np.array(0.5, np.float32), "c"))
        elif t.name == "W2":  # the outlier's product then comes from its weight row
            value = numpy_helper.to_array(t).copy()
            value[FFN_OUTLIER] *= 50.0
            t.CopyFrom(numpy_helper.from_array(value, "W2"))
    rewritten, groups, _ = _split(model)
    assert groups["u"].channels == [FFN_OUTLIER]
    nodes = {n.name: n for n in rewritten.graph.node}
    weights = {t.name: numpy_helper.to_array(t) for t in rewritten.graph.initializer}
    assert nodes["scale"].input[1] == "c" and weights["c"].shape == ()  # the scalar factor stays
    assert not any(n.op_type == "Mul" and n.input[0] in ("u", "u" + RESCALED) for n in rewritten.graph.node)
    bias = weights[nodes["v/Add"].input[1]]
    original = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "bv")
    assert bias[FFN_OUTLIER] == original[FFN_OUTLIER] - SHIFT and bias[0] == original[0]
    assert sum(n.op_type == "Relu" for n in rewritten.graph.node) == 2  # the chain's copy, k channels wide
    for feed in feeds(2, seed=5):
        want, got = _run(model, feed), _run(rewritten, feed)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    rewritten.graph.output.append(onnx.ValueInfoProto(name="u" + RESCALED))
    sess = ort.InferenceSession(rewritten.SerializeToString(), providers=["CPUExecutionProvider"])
    u = sess.run(["u" + RESCALED], feeds(1)[0])[0]
    assert not u[..., FFN_OUTLIER].any()  # what the int8 MatMul quantizes has the channel at 0


def test_the_float_part_is_added_after_the_bias_add():
    rewritten, _, _ = _split(block_model())
    nodes = {n.name: n for n in rewritten.graph.node}
    assert list(nodes["out/Add"].input)[0] == "y0" + RESCALED  # MatMul -> bias Add kept (ORT fuses them)
    final = next(n for n in rewritten.graph.node if n.op_type == "Add" and n.output[0] == "y1")
    assert final.name == f"out/MatMul{SUFFIX}_add"


def test_without_outliers_nothing_goes_float_and_a_plain_matmul_is_left_as_it_is(tmp_path):
    model = block_model()
    for t in model.graph.initializer:
        if t.name in ("gamma", "c", "W2"):
            value = numpy_helper.to_array(t).copy()
            value[LN_OUTLIER if t.name == "gamma" else FFN_OUTLIER] = value[0]
            t.CopyFrom(numpy_helper.from_array(value, t.name))
    onnx.save(model, tmp_path / "plain.onnx")
    split = split_for_dynamic(tmp_path / "plain.onnx", tmp_path / "split.onnx", feeds())
    assert split.float_nodes == [] and not any(n.startswith("outlier channels") for n in split.notes)

    x = helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D])
    y = helper.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", D])
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((D, D)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "one", [x], [y], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "one.onnx")
    split = split_for_dynamic(tmp_path / "one.onnx", tmp_path / "one.split.onnx", feeds())
    assert split.path == tmp_path / "one.onnx" and split.notes == [] and not (tmp_path / "one.split.onnx").exists()


def test_dynamic_first_attempt_meets_the_target_with_outliers_split(tmp_path):
    """Quantized whole, the planted outliers cost the target; the first attempt now meets it with
    no MatMul kept in float (7-bit weights pinned: the verdict does not depend on the CPU)."""
    onnx.save(block_model(), tmp_path / "block.onnx")
    np.savez(tmp_path / "inputs.npz", x=np.concatenate([f["x"] for f in feeds(16, seed=3)]))
    result = quantize(tmp_path / "block.onnx", tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path="avx2", validation_inputs=tmp_path / "inputs.npz"))
    assert result.kept_float_nodes == [] and len(result.attempts) == 1
    assert result.validation.passed and result.validation.min_cosine >= 0.99
    assert any(n.startswith("outlier channels:") for n in result.notes)
    ops = [n.op_type for n in onnx.load(str(result.path)).graph.node]
    assert ops.count("MatMulInteger") == 3 and ops.count("MatMul") == 3  # three int8, three rank-1 float parts


def test_an_activation_that_does_not_vanish_below_zero_is_masked_by_a_mul_instead():
    """tanh(z - SHIFT) is -1, not 0: shifting would not zero the channel, so a Mul does."""
    model = block_model()
    for node in model.graph.node:
        if node.name == "act":
            node.op_type = "Tanh"
    for t in model.graph.initializer:
        if t.name == "c":
            t.CopyFrom(numpy_helper.from_array(np.array(0.5, np.float32), "c"))
        elif t.name == "W2":
            value = numpy_helper.to_array(t).copy()
            value[FFN_OUTLIER] *= 400.0
            t.CopyFrom(numpy_helper.from_array(value, "W2"))
    rewritten, groups, _ = _split(model)
    assert groups["u"].channels == [FFN_OUTLIER]
    weights = {t.name: numpy_helper.to_array(t) for t in rewritten.graph.initializer}
    nodes = {n.name: n for n in rewritten.graph.node}
    assert weights[nodes["v/Add"].input[1]][FFN_OUTLIER] > -SHIFT / 2  # bias not shifted
    assert any(n.op_type == "Mul" and n.input[0] == "u" for n in rewritten.graph.node)  # masked by a Mul
    for feed in feeds(2, seed=5):
        want, got = _run(model, feed), _run(rewritten, feed)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_the_rewrite_is_checked_against_the_maxima_run_and_kept_only_if_equal(tmp_path, monkeypatch):
    """One float session of the source (its maxima run also gives the expected outputs) and one of
    the rewrite; a rewrite that changes the outputs is dropped, the source quantized as it is."""
    from onnxport.core.quantize import outlier_plan

    onnx.save(block_model(), tmp_path / "block.onnx")
    opened = []
    real_session = outlier_plan.session
    monkeypatch.setattr(outlier_plan, "session", lambda *a, **k: opened.append(a[0]) or real_session(*a, **k))
    split = split_for_dynamic(tmp_path / "block.onnx", tmp_path / "split.onnx", feeds())
    assert split.path == tmp_path / "split.onnx" and len(opened) == 2

    def wrong_smooth(model, maxima):  # a rewrite that is not an equivalence
        for t in model.graph.initializer:
            if t.name == "W2":
                t.CopyFrom(numpy_helper.from_array(2 * numpy_helper.to_array(t), t.name))
        return PassResult(model, changed=True, changes=[NodeChange("out/MatMul", REWRITTEN, RESCALED_BY)])

    monkeypatch.setattr(outlier_plan, "smooth", wrong_smooth)
    split = split_for_dynamic(tmp_path / "block.onnx", tmp_path / "wrong.onnx", feeds())
    assert split.path == tmp_path / "block.onnx" and split.float_nodes == []
    assert any("did not match the source" in n for n in split.notes)


@pytest.mark.parametrize("bias_shift", [False, True])
def test_a_tensor_keeps_its_name_only_while_it_keeps_its_values(bias_shift, tmp_path):
    """The float rewrites (outlier split, bias shift, smoothing) change some tensors' values: those get
    a new name, so the verdict's per-tensor comparison with the float model (matched by name) never
    compares a rescaled tensor (MiniLM's '/intermediate/dense/Add: +3.62 relative error, cosine 0.29'
    was a shifted bias Add in a model at 0.9987)."""
    from onnxport.core.evaluate.sensitivity import measure_tensors

    model = block_model()
    if bias_shift:  # u = Relu(v0 + bv) * 0.5: the outlier is zeroed by shifting bv
        for t in model.graph.initializer:
            if t.name == "c":
                t.CopyFrom(numpy_helper.from_array(np.array(0.5, np.float32), "c"))
    src = tmp_path / "block.onnx"
    onnx.save(model, str(src))
    split = split_for_dynamic(src, tmp_path / "split.onnx", open_feeds(feeds(), input_specs(model)),
                              workdir=tmp_path)
    assert split.path != src  # rewritten
    rewritten = onnx.load(str(split.path))
    assert any(n.endswith(RESCALED) for node in rewritten.graph.node for n in node.output)
    errors = measure_tensors(rewritten, model, feeds(1)[0])
    assert errors and all(rel < 1e-4 for rel, _ in errors.values()), {
        t: e for t, e in errors.items() if e[0] >= 1e-4}
