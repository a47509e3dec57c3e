"""What to say when the files opened hold no ONNX model: one wording for the CLI and the app.

Contract: `nothing_to_open(source, loaded, torch_hint)` is the one-line error for an open that
found no model. Parameters alone: the model is missing ("add the eval model next to the
checkpoint"); else the files onnxport cannot read, named with what they look like (a `.whl` is
"not an ONNX model or parameter file onnxport can read", never "add the eval model"), and for
PyTorch programs `torch_hint`, which says where the front end imports them.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.io.kinds import TORCH_PROGRAM_KINDS
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.session import ModelSession


def nothing_to_open(source: str | Path, loaded: ModelSession, torch_hint: str) -> OnnxportError:
    """See the module docstring; `source`: what the user opened (one file or folder, or the first)."""
    if loaded.params is not None:
        return OnnxportError("no ONNX model among the files opened", hint="add the eval model (.onnx) next to the "
                                                                          "checkpoint")
    kinds = {k for _, k in loaded.others}
    shown = ", ".join(f"{Path(p).name} ({k.value})" for p, k in loaded.others[:5])
    more = f" and {len(loaded.others) - 5} more" if len(loaded.others) > 5 else ""
    found = f"; found {shown}{more}" if shown else ""
    hint = torch_hint if kinds & TORCH_PROGRAM_KINDS else "give an .onnx model, a checkpoint or a folder holding them"
    if [Path(p) for p, _ in loaded.others] == [Path(source)]:  # one file, of no kind onnxport reads
        return OnnxportError(f"{source}: not an ONNX model or parameter file onnxport can read", hint=hint)
    return OnnxportError(f"{source}: no ONNX model or parameter file onnxport can read{found}", hint=hint)
