"""Whether Export (and Quantize, which exports first) can run for what is open, and why not.

The core's checkpoint policy (`params.checkpoint_fit`) refuses an export whose checkpoint fits
nothing in the model, or does not fit it (a shape/dtype mismatch, a missing parameter, a nominal
checkpoint); the app disables the two actions for the same reasons, and their tooltip says which
(as plain text: it names tensors). A partial fit is no reason here: the export asks whether to
embed what matches (`gui/dialogs/allow_question.py`).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow

from onnxport.core.params.checkpoint_fit import require_fit
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.session import ModelSession

from .plain_text import plain_tip


def export_refusal(sources: ModelSession | None) -> str | None:
    """The one line the export would stop with, or None when the parameters fit."""
    fit = sources.fit if sources is not None else None
    if fit is None:
        return None
    try:
        require_fit(fit, sources.match, allow_partial=True)
    except OnnxportError as exc:
        return exc.one_line()
    return None


def gate_export(window: QMainWindow, allowed: bool) -> None:
    """Enable `window`'s export and quantize actions when `allowed` (open, idle, outputs checked)
    and the parameters fit; when they do not, the actions are off and their tooltip says why."""
    refusal = export_refusal(window.session)
    for act in (window.export_action, window.quantize_action):
        act.setEnabled(allowed and refusal is None)
        act.setToolTip(plain_tip(f"Export is off: {refusal}") if refusal else "")  # "": the action's text
