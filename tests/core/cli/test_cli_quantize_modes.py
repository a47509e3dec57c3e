"""`onnxport quantize --mode int4|fp16`, static calibration from text (`--tokenizer`), `export --quantize int4`."""

from __future__ import annotations

import json

import numpy as np
import onnx

from onnxport.core.cli import main

from .. import mode_models
from ..quant_models import encoder
from ..quantize.test_calibration_sources import _tokenizer


def test_quantize_int4_cli(tmp_path, capsys):
    src, out = tmp_path / "mlp.onnx", tmp_path / "mlp.int4.onnx"
    onnx.save(mode_models.transformer_mlp(layers=2, d=128, ff=512), src)
    assert main(["quantize", str(src), "-o", str(out), "--mode", "int4", "--block-size", "32", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["quantize"]["mode"] == "int4" and data["quantize"]["options"]["block_size"] == 32
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert ops.count("MatMulNBits") == 4 and ops.count("MatMul") == 1  # the small head stays float32
    assert out.stat().st_size < 0.3 * src.stat().st_size


def test_quantize_int4_with_a_bad_block_size_is_one_line(tmp_path, capsys):
    src = tmp_path / "mlp.onnx"
    onnx.save(mode_models.transformer_mlp(layers=1, d=64, ff=256), src)
    assert main(["quantize", str(src), "-o", str(tmp_path / "o.onnx"), "--mode", "int4", "--block-size", "48",
                 "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "block size must be one of 16, 32, 64, 128, 256" in err[0]
    assert not (tmp_path / "o.onnx").exists()


def test_quantize_int4_method_and_symmetric_from_the_cli(tmp_path, capsys):
    src, out = tmp_path / "mlp.onnx", tmp_path / "mlp.int4.onnx"
    onnx.save(mode_models.transformer_mlp(layers=1, d=128, ff=512), src)
    assert main(["quantize", str(src), "-o", str(out), "--mode", "int4", "--int4-method", "gptq", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GPTQ-style int4 method needs calibration data" in err[0], err
    assert not out.exists()
    assert main(["quantize", str(src), "-o", str(out), "--mode", "int4", "--int4-method", "rtn", "--symmetric",
                 "--no-target", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)["quantize"]
    assert data["options"]["int4_method"] == "rtn" and data["options"]["symmetric"] is True
    assert all(len(n.input) == 3 for n in onnx.load(out).graph.node if n.op_type == "MatMulNBits")


def test_quantize_fp16_cli_says_what_stayed_float32(tmp_path, capsys):
    src, out = tmp_path / "bn.onnx", tmp_path / "bn.fp16.onnx"
    onnx.save(mode_models.constant_bn(c=64), src)  # big enough that float16 halves it
    np.savez(tmp_path / "in.npz", image=np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    assert main(["quantize", str(src), "-o", str(out), "--mode", "fp16", "--validation-inputs",
                 str(tmp_path / "in.npz"), "-q"]) == 0
    text = capsys.readouterr().out
    assert "kept float32, beyond float16's range: bn: weight 'bn.var' reaches 9.8e+07" in text
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_static_calibration_from_lines_of_text(tmp_path, capsys):
    model = encoder(vocab=9)  # ids 0..8: the test tokenizer's vocabulary
    src, out = tmp_path / "enc.onnx", tmp_path / "enc.qdq.onnx"
    onnx.save(model, src)
    tok = _tokenizer(tmp_path / "tok")
    (tmp_path / "lines.txt").write_text("the cat sat on a mat\na dog sat\nthe dog\n" * 4)
    assert main(["quantize", str(src), "-o", str(out), "--mode", "static", "--calibration", str(tmp_path / "lines.txt"),
                 "--tokenizer", str(tok), "--no-target", "--json", "-q"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert not any("generated" in n for n in data["quantize"]["notes"])  # calibrated on the text
    assert "QuantizeLinear" in {n.op_type for n in onnx.load(out).graph.node}


def test_export_quantize_int4(tmp_path, capsys):
    src = tmp_path / "mlp.onnx"
    onnx.save(mode_models.transformer_mlp(layers=1, d=128, ff=512), src)
    out = tmp_path / "model.onnx"
    assert main(["export", str(src), "--outputs", "features", "-o", str(out), "--quantize", "int4", "-q"]) == 0
    written = tmp_path / "model.int4.onnx"
    assert "MatMulNBits" in {n.op_type for n in onnx.load(written).graph.node}
    assert "model.int4.onnx" in capsys.readouterr().out


def test_text_calibration_for_an_image_model_is_one_line(tmp_path, capsys):
    model = mode_models.constant_bn()
    src = tmp_path / "bn.onnx"
    onnx.save(model, src)
    _tokenizer(tmp_path)
    (tmp_path / "lines.txt").write_text("the cat\n")
    assert main(["quantize", str(src), "-o", str(tmp_path / "q.onnx"), "--mode", "static", "--calibration",
                 str(tmp_path / "lines.txt"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the model also takes 'image'" in err[0]
