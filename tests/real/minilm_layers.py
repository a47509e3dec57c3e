"""The real all-MiniLM-L6-v2 checkpoint cut to its first layers, as an inference ONNX model, with
real sentences tokenized by its own tokenizer (shared by the MiniLM tests and the real-model matrix)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .corpus import minilm_folder


def minilm_inference_model(work: Path, sentences: list[str], layers: int = 2) -> tuple[Path, dict[str, np.ndarray]]:
    """Export the first `layers` layers (training-mode export, then onnxport's inference export) into
    `work`; returns the model and the sentences as feeds (input_ids, token_type_ids, attention_mask)."""
    from tokenizers import Tokenizer

    from onnxport.core.export.export import export_model
    from onnxport.core.pytorch.export import export_torch

    source = minilm_folder()
    folder = work / f"minilm-{layers}-layers"
    folder.mkdir()
    for item in source.iterdir():  # real files in the folder: a symlink out of it is (rightly) not read
        if item.is_file() and item.name != "config.json":
            try:
                os.link(item, folder / item.name)
            except OSError:  # another file system
                shutil.copyfile(item, folder / item.name)
    config = json.loads((source / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}))
    export_torch(folder, work / "forward.onnx", mode="training")
    export_model(work / "forward.onnx", work / "minilm.onnx", ["last_hidden_state"])
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encoded = tokenizer.encode_batch(sentences)
    ids = np.array([e.ids for e in encoded], np.int64)
    mask = np.array([e.attention_mask for e in encoded], np.int64)
    return work / "minilm.onnx", {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "attention_mask": mask}


def minilm_with_sentences(work: Path, sentences: list[str]) -> tuple[Path, Path]:
    """(float32 inference model of the first two layers, `sentences` tokenized into an .npz)."""
    model, feed = minilm_inference_model(work, sentences)
    np.savez(work / "sentences.npz", **feed)
    return model, work / "sentences.npz"
