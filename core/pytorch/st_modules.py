"""What a sentence-transformers folder does after the transformer, read from its `modules.json`.

A sentence-transformers folder lists its pipeline in `modules.json`: the Transformer, a Pooling
(its mode in `<path>/config.json`) and often `sentence_transformers.models.Normalize`
(L2-normalised embeddings, e.g. all-MiniLM-L6-v2). The pooling preset applies them too, or its
embeddings differ from sentence-transformers' (norms of ~5 instead of 1).

Contract: `sentence_steps(folder) -> SentenceSteps`: `normalize`, the Pooling's `pooling` mode
("mean"/"cls", None if unstated), `unapplied` (listed steps the preset does not reproduce: Dense,
max pooling...), `problem` (a file there but unusable). Stranger's files: read only inside the
folder (confined.py), at most `MAX_BYTES`, as plain JSON (no code, no class looked up by name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.io.confined import confined_file
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.json_files import load_json

FILE = "modules.json"
MAX_BYTES = 64 << 10  # a real one is a few hundred bytes
PREFIX = "sentence_transformers.models."
NORMALIZE, POOLING = PREFIX + "Normalize", PREFIX + "Pooling"
REPRODUCED = {PREFIX + "Transformer", POOLING, NORMALIZE}  # what the pooling preset does
POOLING_KEYS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}  # what `pool` computes


@dataclass
class SentenceSteps:
    normalize: bool = False
    pooling: str | None = None  # the Pooling module's mode, when it is one the preset computes
    unapplied: list[str] = field(default_factory=list)  # listed steps the preset does not apply
    problem: str | None = None  # why a file was not used (unreadable, too big, outside the folder...)


def _read_json(folder: Path, name: str):
    path, stat = confined_file(name, folder, f"sentence-transformers file {name}")
    if stat.st_size > MAX_BYTES:
        raise OnnxportError(f"{name} is over {MAX_BYTES >> 10} KiB")
    with open(path, "rb") as f:
        return load_json(f.read(MAX_BYTES + 1), name)  # nesting bounded before parsing


def sentence_steps(folder: str | Path) -> SentenceSteps:
    """The folder's sentence-transformers steps; an empty result when it has no modules.json."""
    folder = Path(folder)
    if not (folder / FILE).exists() and not (folder / FILE).is_symlink():
        return SentenceSteps()
    try:
        modules = _read_json(folder, FILE)
    except (OnnxportError, OSError) as exc:
        return SentenceSteps(problem=str(exc) if isinstance(exc, OnnxportError) else f"{FILE}: {exc.strerror}")
    if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                                for m in modules):
        return SentenceSteps(problem=f"{FILE} is not a list of typed modules")
    types = [m["type"] for m in modules]
    steps = SentenceSteps(normalize=NORMALIZE in types, unapplied=[t[:120] for t in types if t not in REPRODUCED])
    pooling = next((m for m in modules if m["type"] == POOLING), None)
    if pooling is not None and isinstance(pooling.get("path"), str):
        _pooling_mode(folder, pooling["path"], steps)
    return steps


def _pooling_mode(folder: Path, path: str, steps: SentenceSteps) -> None:
    if Path(path).is_absolute() or ".." in Path(path).parts:
        steps.unapplied.append(f"its Pooling mode (its path {path[:120]!r} leaves the folder)")
        return
    if not (folder / path / "config.json").exists():
        return  # no mode stated: the preset's default
    try:
        config = _read_json(folder, f"{path}/config.json")
    except (OnnxportError, OSError) as exc:
        reason = str(exc) if isinstance(exc, OnnxportError) else f"{path}/config.json: {exc.strerror}"
        steps.unapplied.append(f"its Pooling mode ({reason})")
        return
    if not isinstance(config, dict):
        return
    modes = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    if len(modes) == 1 and modes[0] in POOLING_KEYS:
        steps.pooling = POOLING_KEYS[modes[0]]
    elif modes:
        steps.unapplied.append(f"Pooling ({', '.join(m.removeprefix('pooling_mode_') for m in modes)[:120]})")
