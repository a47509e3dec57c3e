"""The accuracy search of dynamic int8 and what counts as a pass: the switched model measures "this
node back in float" exactly as quantizing without it would; the search keeps the node that matters;
a classifier must keep its answers, not just its cosine; a quantization that gains nothing, or
quantizes nothing, fails and says so; outputs pass onnx.checker with only the domains they use;
the node ranking never prints inf or +0.0000. Every int8 run pins its int8 path (7-bit weights:
exact on every CPU), so no verdict depends on the CPU."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.compare import CLASSES, LOSSY, VALUES, OutputStats, output_kinds
from onnxport.core.evaluate.runtime import session
from onnxport.core.evaluate.sensitivity import LayerError, layer_errors, ranked_nodes, ranking_lines
from onnxport.core.quantize import modes
from onnxport.core.quantize.domains import used_domains
from onnxport.core.quantize.float_switch import SwitchedRunner, switched
from onnxport.core.quantize.gain import nothing_gained
from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.quantize.search import blocks_of
from onnxport.core.util.errors import OnnxportError

from ..model_builders import make_model
from ..quant_models import encoder, outlier_mlp, save

PIN = "avx2"
ENCODER_FEED = {"input_ids": np.arange(24).reshape(2, 12) % 50, "attention_mask": np.ones((2, 12), np.int64)}


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    return save(encoder(), tmp_path_factory.mktemp("enc") / "encoder.onnx")


def _dynamic(src, dst, exclude=()):
    modes.dynamic(src, dst, op_types=None, per_channel=True, reduce_range=True, exclude=list(exclude), big=False)
    return dst


def test_switched_model_is_the_model_quantized_without_those_nodes(enc, tmp_path):
    full = _dynamic(enc, tmp_path / "full.onnx")
    node = "/ffn/out/MatMul"
    without = _dynamic(enc, tmp_path / "without.onnx", exclude=[node])
    names = [n.name for n in onnx.load(enc).graph.node if n.op_type in ("MatMul", "Gather", "Softmax")]
    model, switches = switched(onnx.load(str(full)), onnx.load(enc), names)
    # the Softmax, the MatMuls of two activations and the Gathers of shapes were never quantized: no switch
    assert set(switches) == {"/emb/word/Gather", "/emb/pos/Gather", "/attn/q/MatMul", "/attn/k/MatMul",
                             "/attn/v/MatMul", "/attn/out/MatMul", "/ffn/in/MatMul", "/ffn/out/MatMul"}
    runner = SwitchedRunner(session(model), switches, [ENCODER_FEED], ["pooled"])
    want_full = session(full).run(["pooled"], ENCODER_FEED)[0]
    want_without = session(without).run(["pooled"], ENCODER_FEED)[0]
    np.testing.assert_allclose(runner.run([])[0][0], want_full, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runner.run([node])[0][0], want_without, rtol=1e-4, atol=1e-5)
    assert not np.allclose(want_full, want_without, rtol=1e-4, atol=1e-5)  # the switch did switch
    every = runner.run(list(switches))[0][0]
    np.testing.assert_allclose(every, session(enc).run(["pooled"], ENCODER_FEED)[0], rtol=1e-4, atol=1e-5)
    assert runner.runs == 3


def test_blocks_are_the_same_role_in_each_layer_and_each_layer():
    names = [f"/encoder/layer.{i}/{part}/MatMul" for i in range(3) for part in ("attention/q", "output/dense")]
    blocks = blocks_of(names + ["/pooler/dense/MatMul"])
    assert blocks["/encoder/layer.*/output/dense/MatMul"] == [f"/encoder/layer.{i}/output/dense/MatMul"
                                                             for i in range(3)]
    assert blocks["/encoder/layer.1/*"] == ["/encoder/layer.1/attention/q/MatMul", "/encoder/layer.1/output/dense/MatMul"]
    assert not any("pooler" in k for k in blocks)  # one of a kind: no block
    assert blocks_of(["a/MatMul", "b/MatMul"]) == {}


def test_the_search_measures_and_keeps_only_the_node_that_matters(tmp_path):
    model = save(outlier_mlp(), tmp_path / "outlier.onnx")
    result = quantize(model, tmp_path / "q.onnx", "dynamic", QuantizeOptions(int8_path=PIN))
    assert result.kept_float_nodes == ["fc2/MatMul"] and result.target_met
    search = result.search
    # ranked in one pass, then measured until one node meets the target alone: the search stops there
    assert search["candidates"] == 3 and 2 <= search["evaluations"] <= 1 + 3 and search["met_in_search"]
    assert search["ranking"][0]["unit"] == "fc2/MatMul"
    assert all(math.isfinite(r["gain"]) and r["gain"] > 0 for r in search["ranking"])
    assert [len(a["kept_float_nodes"]) for a in result.attempts] == [0, 1]  # one real retry, right first time
    assert result.attempts[0]["inputs"] == "held out"


def _two_class_classifier() -> onnx.ModelProto:
    """logits = 20 + (fc2 of a hidden layer with one huge channel): two logits near 20 that differ by
    little; per-tensor int8 activations of fc2 lose that difference and the answer flips, while the
    logits' cosine stays near 1 (both are about 20)."""
    rng = np.random.default_rng(3)
    d, h = 32, 256
    w1 = (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32)
    b1 = np.zeros(h, np.float32)
    b1[0] = 500.0
    w2 = (rng.standard_normal((h, 2)) / np.sqrt(h)).astype(np.float32)
    w2[0, :] = 0.0
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1/MatMul"),
             helper.make_node("Add", ["m1", "b1"], ["a1"], name="fc1/Add"),
             helper.make_node("Relu", ["a1"], ["h1"], name="act1"),
             helper.make_node("MatMul", ["h1", "w2"], ["m2"], name="fc2/MatMul"),
             helper.make_node("Add", ["m2", "b2"], ["logits"], name="fc2/Add")]
    inits = [numpy_helper.from_array(v, k) for k, v in
             {"w1": w1, "b1": b1, "w2": w2, "b2": np.full(2, 20.0, np.float32)}.items()]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", d])],
                      [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 2])], inits)


def test_a_classifier_must_keep_its_answers_not_just_its_cosine(tmp_path):
    model = save(_two_class_classifier(), tmp_path / "cls.onnx")
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(4).standard_normal((64, 32)).astype(np.float32))
    plain = quantize(model, tmp_path / "plain.onnx", "dynamic",
                     QuantizeOptions(int8_path=PIN, per_channel=False, accuracy_target=None,
                                     validation_inputs=tmp_path / "x.npz"))
    logits = plain.validation.outputs[0]
    assert logits.kind == CLASSES and logits.cosine > 0.99 and logits.argmax_agreement < 0.9
    assert not logits.passed and "argmax agreement" in logits.reason and "classifier" in logits.reason
    result = quantize(model, tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, per_channel=False, validation_inputs=tmp_path / "x.npz"))
    assert result.kept_float_nodes == ["fc2/MatMul/MatMulAddFusion"]  # ORT's optimizer made it a Gemm with its Add
    fc2 = [n.op_type for n in onnx.load(str(result.path)).graph.node if n.name.startswith("fc2/")]
    assert fc2 == ["MatMul", "Add"]  # really float (ORT's quantizer splits a Gemm before it reads exclusions)
    assert "argmax" in result.attempts[0]["failures"][0] and result.attempts[0]["min_cosine"] > 0.99
    assert result.validation.passed and result.validation.outputs[0].argmax_agreement >= 0.99


def test_output_kinds_and_the_argmax_criterion_apply_to_classifiers_only():
    model = _two_class_classifier()
    model.graph.node.append(helper.make_node("Softmax", ["logits"], ["p"], name="softmax", axis=-1))
    model.graph.output.append(helper.make_tensor_value_info("p", T.FLOAT, ["batch", 2]))
    model.graph.node.append(helper.make_node("Identity", ["m1"], ["hidden"], name="id"))
    model.graph.output.append(helper.make_tensor_value_info("hidden", T.FLOAT, ["batch", 256]))
    assert output_kinds(model) == {"logits": CLASSES, "p": CLASSES, "hidden": VALUES}
    want = np.array([[20.0, 20.1], [20.1, 20.0], [20.0, 20.2], [20.3, 20.0]])
    got = want.copy()
    got[0] = [20.1, 20.0]  # one answer in four flips; the cosine barely moves
    for kind, passed in ((CLASSES, False), (VALUES, True)):
        stats = OutputStats("logits", kind)
        stats.update(got, want)
        result = stats.result(LOSSY)
        assert result.cosine > 0.9999 and result.argmax_agreement == 0.75 and result.passed is passed


def test_conv_only_model_quantizes_nothing_and_says_so(tmp_path):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    model = make_model([helper.make_node("Conv", ["image", "w"], ["y"], name="conv", pads=[1] * 4)],
                       [helper.make_tensor_value_info("image", T.FLOAT, ["batch", 3, 16, 16])],
                       [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 16, 16, 16])], [w])
    path = save(model, tmp_path / "det.onnx")
    with pytest.raises(OnnxportError, match=r"det.onnx: dynamic quantization found nothing to quantize: this "
                                            r"model's weights are all in Conv layers.*no dynamic model written") as info:
        quantize(path, tmp_path / "q.onnx", "dynamic", QuantizeOptions(int8_path=PIN))
    assert "--mode static" in info.value.one_line()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["det.onnx"]


def test_nothing_gained_unless_smaller_or_measured_faster():
    assert nothing_gained(0.3, None) is None and nothing_gained(0.9, 2.0) is None  # 0.9x or less is a gain
    assert nothing_gained(1.4, 0.5) is None and nothing_gained(0.98, 0.5) is None  # twice as fast
    assert nothing_gained(1.4, 1.02) == "1.40x the size, not smaller, and not faster (latency 1.02x)"
    assert nothing_gained(1.0, None) == "1.00x the size, not smaller, and not measured faster"
    assert nothing_gained(0.98, 1.0) == "0.98x the size, barely smaller (over 0.9x), and not faster (latency 1.00x)"
    assert nothing_gained(1.1, 0.97) is not None  # within noise is not faster


def test_a_median_faster_within_its_interval_is_no_gain():
    """Measured on a loaded machine, a CNN whose dynamic int8 model is 1.00x the size read 0.85x
    latency once in four runs, its interval 0.56-1.54x: the gain must hold at the interval's slow end."""
    assert nothing_gained(1.0, 0.85, 1.54) == ("1.00x the size, not smaller, and not measurably faster "
                                               "(latency 0.85x, within noise up to 1.54x)")
    assert nothing_gained(1.0, 0.7, 0.9) is None  # faster even at the slow end
    assert nothing_gained(1.0, 1.02, 1.3) == "1.00x the size, not smaller, and not faster (latency 1.02x)"


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_outputs_pass_the_checker_and_declare_only_the_domains_they_use(enc, tmp_path, mode):
    result = quantize(enc, tmp_path / "q.onnx", mode, QuantizeOptions(int8_path=PIN, accuracy_target=None))
    model = onnx.load(str(result.path))
    onnx.checker.check_model(model, full_check=True)
    declared = {o.domain for o in model.opset_import}
    assert declared - {""} <= used_domains(model) and "ai.onnx.training" not in declared


def test_the_ranking_never_prints_inf_or_zero_entries():
    """A node whose output turns NaN where its input did not adds 1.0 (flagged); the nodes after it
    add 0.0, not -inf; entries under 0.0001 are not printed."""
    x = helper.make_tensor_value_info("x", T.FLOAT, [4, 8])
    ref = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                      helper.make_node("Sqrt", ["r"], ["s"], name="sqrt"),
                      helper.make_node("Mul", ["s", "s"], ["y"], name="square")],
                     [x], [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])])
    broken = make_model([helper.make_node("Identity", ["x"], ["r"], name="relu"),  # negatives reach the Sqrt
                         helper.make_node("Sqrt", ["r"], ["s"], name="sqrt"),
                         helper.make_node("Mul", ["s", "s"], ["y"], name="square")],
                        [x], [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])])
    feed = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    errors = layer_errors(broken, ref, feed, only_changed=False)
    assert all(math.isfinite(e.added) for e in errors)
    first = errors[0]
    assert first.node == "sqrt" and first.nonfinite and first.added == 1.0
    assert next(e for e in errors if e.node == "square").added == 0.0
    assert first.to_dict()["rel_error"] is None  # JSON-safe
    tiny = LayerError("tiny", "MatMul", "t", 1e-6, 1.0, 1e-6)
    odd = LayerError("odd", "MatMul", "o", math.inf, 0.0, -math.inf)
    lines = ranking_lines(errors + [tiny, odd])
    text = "\n".join(lines)
    assert "inf" not in text and "+0.0000" not in text and "tiny" not in text and "odd" not in text
    assert lines[1].strip().startswith("sqrt (Sqrt): makes non-finite")
    assert ranked_nodes([tiny, odd]) == [] and ranking_lines([tiny]) == [
        "no single node adds a measurable error (each under 0.0001 relative)"]
