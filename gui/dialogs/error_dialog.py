"""Errors as the user sees them: one line that says what went wrong, details on demand.

A core `OnnxportError` carries a one-line reason (and maybe a hint) meant for people; anything
else is a bug, shown as "Unexpected error" with its type. The traceback is in "Show Details…",
never in the main text. The box is shown window-modal with `open()` (not `exec()`), so the
event loop keeps running (and tests can find and close it).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from onnxport.core.util.errors import OnnxportError

from ..widgets.plain_text import message_box


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OnnxportError):
        return exc.one_line()
    if isinstance(exc, MemoryError):
        return "out of memory"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"Unexpected error ({type(exc).__name__}){': ' + text if text else ''}"


def show_error(parent: QWidget, title: str, exc: BaseException, details: str = "") -> QMessageBox:
    box = message_box(QMessageBox.Warning, title, error_text(exc), QMessageBox.Ok, parent)  # names: plain text
    box.setObjectName("errorDialog")
    if details:
        box.setDetailedText(details)
    box.open()
    return box
