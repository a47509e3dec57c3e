"""What a Hugging Face folder may make transformers read and allocate, checked before it does.

Why: transformers follows a folder's files where they lead: a `weight_map` entry `../x` in an
index (or a shard symlinked out) made the export hold an outside file's bytes; a tiny folder whose
config.json asks for a 4M-word vocabulary made it allocate 16 GB of weights it does not have.

Contract:
- `weight_files(folder)`: the weight files (`*.safetensors`, `pytorch_model*.bin`) and every file a
  `*.index.json` names, each a regular file inside the folder (`confined`); else one line.
- `check_json_files(folder)`: every `*.json` of the folder (transformers parses them) inside it,
  bounded in size and nesting (util/json_files.py);
- `check_requested_size(folder, model_bytes, weights)`: the model the config describes may take
  at most max(HF_SIZE_FLOOR, HF_SIZE_RATIO x the weight files' bytes) (fp16/bf16 weights load as
  float32: 2x; a task head initialised at random is small); else one line refusing it.
"""

from __future__ import annotations

import os
from pathlib import Path

from onnxport.core.io.confined import ConfinementError, confined_file
from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.budgets import JSON_FILE_MAX, MiB, human_bytes
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.json_files import check_json_file, read_json

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
INDEX_PATTERN = "*.index.json"
INDEX_MAX_BYTES = 64 * MiB  # real indexes: ~100 bytes per tensor
HF_SIZE_FLOOR = 256 * MiB
HF_SIZE_RATIO = 4


def _confined(name: str, folder: Path, what: str) -> Path:
    try:
        path, _ = confined_file(name, folder, what)
    except ConfinementError as exc:
        raise OnnxportError(f"{folder}: {exc}") from None
    return path


def _indexed(index: Path, folder: Path) -> list[Path]:
    """The shard files `index` names, each confined to the folder."""
    st = regular_file(index)
    if st.st_size > INDEX_MAX_BYTES:
        raise OnnxportError(f"{index}: {human_bytes(st.st_size)}, too big for a weight index "
                            f"(at most {human_bytes(INDEX_MAX_BYTES)})")
    data = read_json(index, INDEX_MAX_BYTES)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise OnnxportError(f"{index}: no weight_map of tensor names to file names")
    return [_confined(name, folder, f"weight file named by {index.name}") for name in sorted(set(weight_map.values()))]


def weight_files(folder: str | os.PathLike) -> list[Path]:
    """See the module docstring."""
    folder = Path(folder)
    found = [p for pattern in WEIGHT_PATTERNS for p in sorted(folder.glob(pattern))]
    if not found:
        raise OnnxportError(f"{folder}: no weights (model.safetensors or pytorch_model.bin) in the folder")
    for path in found:
        _confined(path.name, folder, "weight file")
    for index in sorted(folder.glob(INDEX_PATTERN)):
        _confined(index.name, folder, "weight index")
        _indexed(index, folder)
    return found


def check_json_files(folder: str | os.PathLike) -> None:
    """See the module docstring."""
    folder = Path(folder)
    for path in sorted(folder.glob("*.json")):
        check_json_file(_confined(path.name, folder, "JSON file"), JSON_FILE_MAX)


def check_requested_size(folder: str | os.PathLike, model_bytes: int, weights: list[Path]) -> None:
    """See the module docstring."""
    held = sum(os.stat(p).st_size for p in weights)
    limit = max(HF_SIZE_FLOOR, HF_SIZE_RATIO * held)
    if model_bytes > limit:
        raise OnnxportError(f"{folder}: config.json describes a model of {human_bytes(model_bytes)} but the folder "
                            f"holds {human_bytes(held)} of weights; refused (at most {human_bytes(limit)} "
                            f"would be allocated)")
