"""A Hugging Face folder's JSON files nested deep are refused in one line before transformers (or
onnxport) parses them (issue 36: 5,000-200,000 levels raised RecursionError)."""

from __future__ import annotations

import shutil

import pytest

from onnxport.core.cli import main
from onnxport.core.pytorch.st_modules import sentence_steps
from onnxport.core.quantize.calibration_sources import _tokenizer_config
from onnxport.core.util.errors import OnnxportError

from .. import torch_builders as builders

pytest.importorskip("transformers")
DEEP = "[" * 100_000 + "]" * 100_000
SHALLOW_ENOUGH_TO_FIT = "[" * 20_000 + "]" * 20_000  # under modules.json's 64 KiB


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return builders.tiny_bert(tmp_path_factory.mktemp("hf") / "bert", tokenizer=True)


@pytest.mark.parametrize(("name", "text"), [
    ("config.json", '{"model_type": "bert", "x": ' + DEEP + "}"),
    ("tokenizer_config.json", '{"a": ' + DEEP + "}"),
    ("tokenizer.json", DEEP),
    ("special_tokens_map.json", DEEP),
    ("model.safetensors.index.json", '{"weight_map": ' + DEEP + "}"),
])
def test_deep_json_in_the_folder_is_one_line(bert, tmp_path, capsys, name, text):
    folder = shutil.copytree(bert, tmp_path / "bert")
    (folder / name).write_text(text)
    assert main(["torch-export", str(folder), "-o", str(tmp_path / "out.onnx"), "--mode", "inference"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RecursionError" not in err and "internal error" not in err, err
    assert f"{name}: JSON nested" in err and "levels deep (at most 100)" in err
    assert not (tmp_path / "out.onnx").exists()


def test_sentence_transformers_files_and_tokenizer_config(tmp_path):
    (tmp_path / "modules.json").write_text(SHALLOW_ENOUGH_TO_FIT)
    assert "modules.json: JSON nested 20000 levels deep" in sentence_steps(tmp_path).problem
    (tmp_path / "modules.json").write_text('[{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}]')
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(SHALLOW_ENOUGH_TO_FIT)
    assert "levels deep" in sentence_steps(tmp_path).unapplied[0]
    (tmp_path / "tokenizer_config.json").write_text(DEEP)
    assert _tokenizer_config(tmp_path / "tokenizer.json") == {}  # unreadable: the tokenizer's own settings


def test_a_folder_json_that_is_a_fifo_does_not_block(bert, tmp_path):
    import os

    from onnxport.core.pytorch.hf_files import check_json_files

    folder = shutil.copytree(bert, tmp_path / "bert")
    os.mkfifo(folder / "extra.json")
    with pytest.raises(OnnxportError, match="extra.json"):
        check_json_files(folder)
