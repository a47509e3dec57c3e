"""Errors as the user sees them: one line that says what went wrong, details on demand.

A core `OnnxportError` carries a one-line reason (and maybe a hint) meant for people; anything
else is a bug, shown as "Unexpected error" with its type. "Show Details…" explains it in words and
names the log file that holds the traceback (error_log.py); no traceback is shown. The box is
shown window-modal with `open()` (not `exec()`), so the event loop keeps running (and tests can
find and close it).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from onnxport.core.util.errors import OnnxportError

from ..widgets.plain_text import message_box
from .error_log import details_in_words, log_error


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
    if details:  # the traceback goes to a log file; the dialog says what happened in words
        box.setDetailedText(details_in_words(exc, log_error(title, exc, details)))
    box.open()
    return box
