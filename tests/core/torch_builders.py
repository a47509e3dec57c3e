"""Tiny PyTorch models and sources for the torch tests (import only after importorskip("torch")).

- `bn_net()`: Conv-BatchNorm-ReLU-Dropout-Flatten-Linear (image 1x6x6 -> 3 classes).
- `ln_net()`: Linear-LayerNorm-GELU-Dropout-Linear (8 features -> 3 classes).
- `save_torchscript(model, path)`, `save_pt2(model, example, path, train=...)`: the two program files.
- `tiny_bert(folder, architecture, tokenizer=False)`: a random-config BERT (hidden 32, 2 layers)
  saved with save_pretrained (config.json + model.safetensors), optionally with a WordPiece
  tokenizer (vocab.txt); `tiny_distilbert(folder)`: a model whose forward has no token_type_ids.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

VOCAB = 100


def bn_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.2), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 3))
    model.train()
    with torch.no_grad():  # non-trivial running statistics
        for _ in range(3):
            model(torch.randn(8, 1, 6, 6) * 2 + 0.5)
    return model


def ln_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 3))


def save_torchscript(model: nn.Module, path: Path) -> Path:
    torch.jit.script(model).save(str(path))
    return path


def save_pt2(model: nn.Module, example: tuple, path: Path, train: bool = False) -> Path:
    model.train(train)
    program = torch.export.export(model, example, dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, str(path))
    return path


def _bert_config(**extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=37, max_position_embeddings=64, **extra)


def tiny_bert(folder: Path, architecture: str = "BertModel", tokenizer: bool = False, seed: int = 0,
              **config) -> Path:
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(_bert_config(**config))
    model.save_pretrained(str(folder))
    if tokenizer:
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)]
        (folder / "vocab.txt").write_text("\n".join(words) + "\n")
        transformers.BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))
    return folder


def tiny_distilbert(folder: Path, seed: int = 0) -> Path:
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(seed)
    config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                              max_position_embeddings=64)
    DistilBertModel(config).save_pretrained(str(folder))
    return folder
