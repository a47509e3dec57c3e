"""The window's log: a dock at the bottom holding plain text lines, each stamped with the time.

Lines are plain text (`appendPlainText`: names from files never render as markup) in the system's
fixed-pitch font, unwrapped (a horizontal scroll bar instead), so the tables a report logs line
up. The log follows new lines unless the user scrolled up to read.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QDockWidget, QPlainTextEdit, QWidget

MAX_LINES = 5000


def log_font() -> QFont:
    """The font the log asks for: the system's fixed-pitch font (never a family name of our own),
    asked as fixed-pitch and typewriter-styled, so that where the platform resolves that family to
    a proportional face (Qt's offscreen platform on a bare machine did), font matching still
    prefers a fixed-pitch one."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    font.setFixedPitch(True)
    return font


class LogDock(QDockWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Log", parent)
        self.setObjectName("logDock")
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setFont(log_font())
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)  # a table's rows stay one line each
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setWidget(self.view)

    def log_line(self, text: str) -> None:
        self.log_lines([text])

    def log_lines(self, lines: list[str]) -> None:
        """Append lines in one go (one by one, a report's 40-odd lines each laid the view out)."""
        if not lines:
            return
        bar = self.view.verticalScrollBar()
        following = bar.value() >= bar.maximum() - 1
        stamp = time.strftime("%H:%M:%S")
        self.view.appendPlainText("\n".join(f"{stamp}  {text}" for text in lines))
        if following:
            bar.setValue(bar.maximum())
