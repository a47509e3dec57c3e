"""Bundled sentences for a text model are cut after their last real token: a tokenizer padding to a
fixed length (all-MiniLM-L6-v2's pads to 128) made every search and verdict run mostly padding."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from onnxport.core.evaluate.feeds import input_specs
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import held_out

from ..quant_models import encoder, save
from .test_calibration_sources import _tokenizer

FIXED = 96


def _fixed_padding_model(folder: Path) -> Path:
    """The small test encoder beside a tokenizer that pads every line to FIXED tokens."""
    from tokenizers import Tokenizer

    folder.mkdir()
    model = Path(save(encoder(vocab=9, d=64, ff=256), folder / "model.onnx"))
    tok_folder = _tokenizer(folder / "tok")
    tok = Tokenizer.from_file(str(tok_folder / "tokenizer.json"))
    tok.enable_padding(length=FIXED, pad_id=0, pad_token="[PAD]")
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(f'{{"pad_token": "[PAD]", "model_max_length": {FIXED}}}')
    shutil.rmtree(tok_folder)
    return model


def test_bundled_batches_end_at_their_last_real_token(tmp_path):
    model = _fixed_padding_model(tmp_path / "hf")
    source = held_out.default_text(input_specs(load_graph(model)), model, None)
    batches = list(source)
    assert len(batches) >= 8
    for batch in batches:
        mask = batch["attention_mask"]
        assert mask.shape == batch["input_ids"].shape and mask.shape[1] < FIXED
        assert mask[:, -1].any()  # the last column holds a real token of some line: nothing real was cut
    lines = [t for t in held_out.TEXT_FILE.read_text(encoding="utf-8").splitlines() if t.strip()]
    assert sum(b["attention_mask"].shape[0] for b in batches) == len(lines)
    assert all(np.all(b["attention_mask"].sum(1) > 0) for b in batches)
