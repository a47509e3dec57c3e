"""Hugging Face folders: weight files confined to the folder, configs bounded by the weights
(issue 27, items 6 and 7)."""

from __future__ import annotations

import json
import shutil

import pytest

from onnxport.core.pytorch.hf_files import check_requested_size, weight_files
from onnxport.core.util.errors import OnnxportError

from .. import torch_builders as builders

pytest.importorskip("transformers")


def _sharded(folder, outside_name: str):
    """A tiny BERT whose index sends every tensor to `outside_name` (a copy of its own shard)."""
    from safetensors import safe_open

    builders.tiny_bert(folder)
    shard = folder / "model-00001-of-00001.safetensors"
    (folder / "model.safetensors").rename(shard)
    with safe_open(str(shard), "pt") as f:
        names = list(f.keys())
    shutil.copy(shard, folder / outside_name)
    index = {"metadata": {}, "weight_map": {n: outside_name for n in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def test_an_index_naming_a_file_outside_the_folder_is_refused(tmp_path):
    from onnxport.core.pytorch.sources import load_program

    (tmp_path / "bert").mkdir()
    folder = _sharded(tmp_path / "bert", "../outside.safetensors")
    assert (tmp_path / "outside.safetensors").is_file()
    with pytest.raises(OnnxportError, match="weight file named by model.safetensors.index.json "
                                            "'../outside.safetensors' leads outside"):
        load_program(folder)
    inside = tmp_path / "inside"
    inside.mkdir()
    load_program(_sharded(inside, "model-shard.safetensors"))  # the same index inside the folder loads


def test_a_weight_file_symlinked_out_of_the_folder_is_refused(tmp_path):
    folder = builders.tiny_bert(tmp_path / "bert")
    outside = tmp_path / "elsewhere.safetensors"
    (folder / "model.safetensors").rename(outside)
    (folder / "model.safetensors").symlink_to(outside)
    with pytest.raises(OnnxportError, match="weight file 'model.safetensors' leads outside"):
        weight_files(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(OnnxportError, match="no weights"):
        weight_files(folder)


def test_a_config_asking_for_more_than_the_weights_hold_is_refused_before_allocating(tmp_path):
    from onnxport.core.pytorch.hf_folder import describe_hf

    folder = builders.tiny_bert(tmp_path / "bert")
    config = json.loads((folder / "config.json").read_text())
    config["vocab_size"] = 4_000_000  # 4M words x 32 x 4 bytes: 512 MB asked of a ~0.3 MB folder
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(OnnxportError, match=r"config.json describes a model of 488.3 MiB but the folder holds"):
        describe_hf(folder)


def test_the_size_bound_follows_the_weights(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(bytes(1000))
    check_requested_size(tmp_path, 256 << 20, [weights])  # the floor
    with pytest.raises(OnnxportError, match="refused"):
        check_requested_size(tmp_path, (256 << 20) + 1, [weights])
