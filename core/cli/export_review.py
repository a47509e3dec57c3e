"""`onnxport export`'s look before it writes: the outputs to use, and what a newcomer trips over.

- no `--outputs`: the suggested outputs `onnxport inspect` prints, named on stderr once written;
- parameter-like inputs (`fc1.weight`...) that would stay inputs of the written model: the core's
  refusal (`params.checkpoint_fit`), said with the CLI's options (`--checkpoint`,
  `--keep-parameter-inputs`);
- a training-only output (the loss): a warning, as the app greys it out, naming the inputs it keeps
  (printed after the export, so that a failed run still ends with its one error line).
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.params.checkpoint_fit import names_text
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.review import ExportReview


def dangling_error(model: str, names: list[str]) -> OnnxportError:
    """The one line for an eval graph exported without its checkpoint (the core's refusal,
    `params.checkpoint_fit.UnfilledParameterInputs`, in the CLI's options)."""
    what = "a parameter input" if len(names) == 1 else f"{len(names)} parameter inputs"
    beside = Path(model).parent / "checkpoint"
    ckpt = str(beside) if beside.exists() else "CKPT"
    return OnnxportError(
        f"{model}: no --checkpoint, so {what} ({names_text(names)}) would stay inputs without values; "
        f"pass the checkpoint with --checkpoint {ckpt} (or --keep-parameter-inputs to keep them as inputs)")


def notes(review: ExportReview, quiet: bool) -> list[str]:
    """The stderr lines for a review: which outputs were defaulted to, training-only outputs."""
    lines = []
    if review.defaulted and not quiet:
        lines.append(f"onnxport: no --outputs given; used the suggested outputs: {', '.join(review.outputs)}")
    if review.training_only:
        kept = (f"; {names_text(review.training_inputs)} "
                f"{'stays an input' if len(review.training_inputs) == 1 else 'stay inputs'} because of it"
                if review.training_inputs else "")
        lines.append(f"onnxport: warning: {names_text(review.training_only)} "
                     f"{'is' if len(review.training_only) == 1 else 'are'} training-only (part of the loss "
                     f"computation; the app greys it out){kept}")
    return lines
