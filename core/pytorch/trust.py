"""Trust for PyTorch *programs*: loading or running one executes its author's code.

Why: a TorchScript `.pt` runs TorchScript code when it is loaded (`__setstate__`) and when it
runs (any op it calls: `torch.from_file` creates files, `torch.save` writes them); a
`torch.export` `.pt2` is deserialized through sympy's `sympify` (Python `eval` of expression
strings stored in the archive) and its graph calls whatever operators its nodes name. So, like
transformers' `trust_remote_code`, onnxport opens a program only when its caller says the source
is trusted: the core takes `trust_code: bool = False` (no global switch), the CLI has
`--trust-model-code`, the app asks once per file.

Parameters are data, not programs, and need no trust: a state_dict `.pt` (read with
`weights_only=True`), safetensors, `.npz`, and Hugging Face folders (safetensors or weights-only
`.bin`, `trust_remote_code=False`). Even a trusted `.pt2` is never unpickled (pt2_check.py).
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.util.errors import OnnxportError

PROGRAM_KINDS = frozenset({SourceKind.TORCHSCRIPT, SourceKind.TORCH_EXPORT})
_LABELS = {SourceKind.TORCHSCRIPT: "TorchScript file", SourceKind.TORCH_EXPORT: "torch.export .pt2 file"}
API_HINT = "pass trust_code=True if you trust where it came from"


class UntrustedProgramError(OnnxportError):
    """A program source (TorchScript, .pt2) was given without trust_code=True."""


def trust_reason(kind: SourceKind) -> str:
    """Why `kind` needs trust, as one sentence fragment (shown by the CLI and the app)."""
    return f"a {_LABELS.get(kind, kind.value)} is a program: loading and running it executes its author's code"


def needs_trust(path: str | Path) -> SourceKind | None:
    """The source's kind if opening it runs its author's code (TorchScript, .pt2), else None."""
    kind = sniff(path)
    return kind if kind in PROGRAM_KINDS else None


def require_trust(path: str | Path, kind: SourceKind, trust_code: bool) -> None:
    """Raise `UntrustedProgramError` for a program source the caller did not trust."""
    if kind in PROGRAM_KINDS and not trust_code:
        raise UntrustedProgramError(f"{path}: not opened: {trust_reason(kind)}", hint=API_HINT)
