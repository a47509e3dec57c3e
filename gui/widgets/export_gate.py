"""Whether Export (and Quantize, which exports first) can run for what is open, and why not.

The CLI refuses an export whose checkpoint does not fit the model (a shape/dtype mismatch, a
missing parameter, a nominal checkpoint: `ParamMatch.raise_if_unusable`); the app disables the
two actions for the same reasons, and their tooltip says which (as plain text: it names tensors).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow

from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.sources import LoadedSources

from .plain_text import plain_tip


def export_refusal(sources: LoadedSources | None) -> str | None:
    """The one line the export would stop with, or None when the parameters fit."""
    if sources is None or sources.match is None:
        return None
    try:
        sources.match.raise_if_unusable()
    except OnnxportError as exc:
        return exc.one_line()
    return None


def gate_export(window: QMainWindow, allowed: bool) -> None:
    """Enable `window`'s export and quantize actions when `allowed` (open, idle, outputs checked)
    and the parameters fit; when they do not, the actions are off and their tooltip says why."""
    refusal = export_refusal(window.sources)
    for act in (window.export_action, window.quantize_action):
        act.setEnabled(allowed and refusal is None)
        act.setToolTip(plain_tip(f"Export is off: {refusal}") if refusal else "")  # "": the action's text
