"""Deploy targets on the real models (issue 31): `.ort` + operator config written, loaded and
matching bit for bit; down-conversion to ORT 1.17 (opset 20, IR 9) and ORT 1.14 (opset 18, IR 8)
loaded and matching (silero_vad's ConstantOfShape, which onnx.version_converter cannot bring below
opset 20, relabelled); fixed shapes matching at that size.

The real models are at opset 11-16, which every target reads (kept as they are, still checked);
to convert down for real, each is first brought up to opset 21 / IR 10 with onnx's own
version_converter, then deployed back down.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import version_converter

from onnxport.core.deploy.deploy import deploy
from onnxport.core.deploy.shapes import parse_shape_options

from . import corpus

MODELS = {"det": corpus.ocr_detector, "rec": corpus.ocr_recognizer, "cls": corpus.ocr_classifier,
          "vad": corpus.silero_vad, "magika": corpus.magika}


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_ort_mobile_written_loaded_and_bit_exact(name, tmp_path):
    result = deploy(MODELS[name](), "ort-mobile", tmp_path / f"{name}.ort")
    assert listing(tmp_path) == [f"{name}.ort", f"{name}.required_operators_and_types.config"]
    config = (tmp_path / f"{name}.required_operators_and_types.config").read_text()
    assert "ai.onnx;" in config
    assert result.check.passed and result.check.exact
    assert all(o["max_abs_diff"] == 0.0 for o in result.check.outputs.values())
    assert set(result.usability) == {"NNAPI", "CoreML NeuralNetwork", "CoreML MLProgram"}


@pytest.mark.parametrize("target", ["ort-1.17", "ort-1.14"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_runtime_targets_from_opset_21(name, target, tmp_path):
    up = version_converter.convert_version(onnx.load(MODELS[name]()), 21)
    up.ir_version = 10
    source = tmp_path / f"{name}-21.onnx"
    onnx.save(up, source)
    out = tmp_path / f"{name}.{target}.onnx"
    result = deploy(source, target, out)
    opset, ir = {"ort-1.17": (20, 9), "ort-1.14": (18, 8)}[target]
    written = onnx.load(out, load_external_data=False)
    assert (written.opset_import[0].version, written.ir_version) == (opset, ir)
    assert result.check.passed and result.check.plain
    assert f"opset 21 -> {opset} (onnx.version_converter)" in result.converted


@pytest.mark.parametrize("name", ["det", "cls"])
def test_real_model_kept_as_it_is_for_an_older_runtime(name, tmp_path):
    result = deploy(MODELS[name](), "ort-1.14", tmp_path / "old.onnx")
    assert result.check.passed and result.check.exact and not result.converted
    assert any(k.startswith("opset") and "kept" in k for k in result.kept)


@pytest.mark.parametrize(("name", "shapes", "dims", "fed"), [
    ("det", ["x=1x3x320x320"], [], "x[1, 3, 320, 320]"),
    ("rec", ["x=1x3x48x320"], [], "x[1, 3, 48, 320]"),
    ("cls", [], ["x:0=1", "x:2=48", "x:3=192"], "x[1, 3, 48, 192]"),
    ("vad", [], ["input:0=1", "state:1=1"], "state[2, 1, 128]"),
])
def test_fixed_shapes_match_at_the_fixed_size(name, shapes, dims, fed, tmp_path):
    result = deploy(MODELS[name](), "ort-mobile", tmp_path / f"{name}.ort", request=parse_shape_options(shapes, dims))
    assert result.check.passed and fed in result.check.inputs


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    pytest.importorskip("torch")
    from .minilm_layers import minilm_inference_model

    model, _feeds = minilm_inference_model(tmp_path_factory.mktemp("minilm"), ["a sentence"], layers=1)
    return model


@pytest.mark.torch
def test_minilm_ort_mobile_and_ort_1_14(minilm, tmp_path):
    mobile = deploy(minilm, "ort-mobile", tmp_path / "minilm.ort")
    assert mobile.check.passed and all(o["max_abs_diff"] == 0.0 for o in mobile.check.outputs.values())
    up = version_converter.convert_version(onnx.load(minilm), 21)
    up.ir_version = 10
    onnx.save(up, tmp_path / "minilm-21.onnx")
    old = deploy(tmp_path / "minilm-21.onnx", "ort-1.14", tmp_path / "minilm.ort-1.14.onnx")
    assert old.check.passed and "opset 21 -> 18 (onnx.version_converter)" in old.converted


@pytest.mark.parametrize("mode", ["fp16", "int8"])
def test_quantized_and_fp16_results_deploy_too(mode, tmp_path):
    quantized = tmp_path / f"cls.{mode}.onnx"
    if mode == "fp16":
        from onnxport.core.quantize.fp16_convert import to_float16

        model = onnx.load(corpus.ocr_classifier())
        to_float16(model)  # in place
        onnx.save(model, quantized)
    else:
        from onnxruntime.quantization import quantize_dynamic

        quantize_dynamic(corpus.ocr_classifier(), quantized)
    for target, out in (("ort-mobile", f"cls.{mode}.ort"), ("ort-1.17", f"cls.{mode}.ort-1.17.onnx")):
        result = deploy(quantized, target, tmp_path / out)
        assert result.check.passed and not result.check.exact and (tmp_path / out).is_file()
