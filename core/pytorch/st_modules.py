"""What a sentence-transformers folder does after pooling, read from its `modules.json`.

A sentence-transformers model folder lists its pipeline in `modules.json`: the Transformer, its
Pooling and, often, `sentence_transformers.models.Normalize` (L2-normalised embeddings, e.g.
all-MiniLM-L6-v2). The pooling preset must apply that step too, or its embeddings differ from the
ones sentence-transformers gives (norms of ~5 instead of 1).

Contract: `sentence_steps(folder) -> SentenceSteps`: `normalize` when a Normalize module is listed,
`unapplied` naming listed modules the preset does not reproduce (Dense, ...), `problem` when the
file is there but unusable. The file is a stranger's: a regular file, at most `MAX_BYTES`, plain
JSON only (no code, no class looked up by its name); no path it names is opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.errors import OnnxportError

FILE = "modules.json"
MAX_BYTES = 64 << 10  # a real one is a few hundred bytes
PREFIX = "sentence_transformers.models."
NORMALIZE = PREFIX + "Normalize"
REPRODUCED = {PREFIX + "Transformer", PREFIX + "Pooling", NORMALIZE}  # what the pooling preset does


@dataclass
class SentenceSteps:
    normalize: bool = False
    unapplied: list[str] = field(default_factory=list)  # listed module types the preset does not apply
    problem: str | None = None  # why modules.json was not used (unreadable, too big, not a list...)


def sentence_steps(folder: str | Path) -> SentenceSteps:
    """The folder's sentence-transformers steps; an empty result when it has no modules.json."""
    path = Path(folder) / FILE
    if not path.exists() and not path.is_symlink():
        return SentenceSteps()
    try:
        if regular_file(path).st_size > MAX_BYTES:
            return SentenceSteps(problem=f"{FILE} is over {MAX_BYTES >> 10} KiB")
        with open(path, "rb") as f:
            modules = json.loads(f.read(MAX_BYTES + 1).decode("utf-8"))
    except (OnnxportError, OSError, ValueError) as exc:  # ValueError: bad UTF-8 or JSON
        return SentenceSteps(problem=f"{FILE} is not readable JSON ({type(exc).__name__})")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        return SentenceSteps(problem=f"{FILE} is not a list of modules")
    types = [m.get("type") for m in modules]
    if not all(isinstance(t, str) for t in types):
        return SentenceSteps(problem=f"{FILE} has a module without a type name")
    return SentenceSteps(normalize=NORMALIZE in types, unapplied=[t[:120] for t in types if t not in REPRODUCED])
