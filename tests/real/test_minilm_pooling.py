"""`torch-export --task pooling` of the real all-MiniLM-L6-v2 folder gives sentence-transformers'
embeddings: mean pooling, then the Normalize module its modules.json lists (unit norms), equal to
the model's own PyTorch states pooled and normalised the same way."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from onnxport.core.cli import main

from .corpus import minilm_folder
from .test_minilm_quantize import SENTENCES


@pytest.mark.torch
def test_minilm_pooling_embeddings_are_normalised(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    folder = minilm_folder()
    out = tmp_path / "minilm.onnx"
    assert main(["torch-export", str(folder), "-o", str(out), "--mode", "inference", "--task", "pooling", "-q",
                 "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["torch_export"]["notes"]
    assert any("L2-normalised" in n for n in notes)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encoded = tokenizer.encode_batch(SENTENCES)
    ids = np.array([e.ids for e in encoded], np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in encoded], np.int64),
             "token_type_ids": np.zeros_like(ids)}
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})[0]
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    with torch.no_grad():
        hidden = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
    mask = torch.from_numpy(feeds["attention_mask"]).unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    assert np.max(np.abs(got - expected)) <= 1e-5
