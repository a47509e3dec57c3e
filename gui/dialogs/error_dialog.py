"""Errors as the user sees them: one line that says what went wrong, details on demand.

A core `OnnxportError` carries a one-line reason (and maybe a hint) meant for people; anything
else is a bug, shown as "Unexpected error" with its type. "Show Details…" explains it in words and
names the log file that holds the traceback (error_log.py); no traceback is shown. The box is
shown window-modal with `open()` (not `exec()`), so the event loop keeps running (and tests can
find and close it).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QWidget

from onnxport.core.util.errors import OnnxportError

from ..widgets.plain_text import message_box
from .app_hints import app_one_line
from .error_log import details_in_words, log_error


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OnnxportError):
        return app_one_line(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"Unexpected error ({type(exc).__name__}){': ' + text if text else ''}"


def show_error(parent: QWidget | None, title: str, exc: BaseException, details: str = "") -> QMessageBox:
    """The error's dialog; `details` (a traceback) goes to the error log, which "Show Details…" names."""
    if not details:
        return show_logged_error(parent, title, exc, None, with_details=False)
    return show_logged_error(parent, title, exc, log_error(title, exc, details))


def show_logged_error(parent: QWidget | None, title: str, exc: BaseException, log: Path | None,
                      with_details: bool = True) -> QMessageBox:
    """The error's dialog, its traceback already in the log at `log` (None: it could not be written)."""
    box = message_box(QMessageBox.Warning, title, error_text(exc), QMessageBox.Ok, parent)  # names: plain text
    box.setObjectName("errorDialog")
    if with_details:  # the traceback is in a log file; the dialog says what happened in words
        box.setDetailedText(details_in_words(exc, log))
    box.open()
    return box
