"""The window's log: a dock at the bottom holding plain text entries, each stamped with the time.

An entry (`log_lines`: one call's lines) gets one time stamp; its further lines are indented under
its first, so a summary reads as one entry, not a column of stamps. Text is plain
(`appendPlainText`: names from files never render as markup) in the system's fixed-pitch font and
wraps at the dock's width (a long path is read, not cut at the right edge). Tables are not logged:
a report's before/after table is in the Report tab, laid out as a table (`without_table`). The log
follows new lines unless the user scrolled up to read.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase, QTextOption
from PySide6.QtWidgets import QDockWidget, QPlainTextEdit, QWidget

MAX_LINES = 5000
TABLE_START = "before/after:"  # where a report's summary lines (evaluate.report.summary_lines) start their table
TABLE_SHOWN = "before/after: the table is in the Report tab"


def without_table(lines: list[str]) -> list[str]:
    """A report's summary lines without the before/after table (one line says where it is)."""
    return lines[:lines.index(TABLE_START)] + [TABLE_SHOWN] if TABLE_START in lines else list(lines)


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
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.view.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # a path breaks too
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(self.view)

    def log_line(self, text: str) -> None:
        self.log_lines([text])

    def log_lines(self, lines: list[str]) -> None:
        """Append one entry in one go (one line at a time, a report's 40-odd lines each laid the
        view out): the time stamp on its first line, the others indented under it."""
        if not lines:
            return
        bar = self.view.verticalScrollBar()
        following = bar.value() >= bar.maximum() - 1
        stamp = time.strftime("%H:%M:%S") + "  "
        indent = " " * len(stamp)
        self.view.appendPlainText("\n".join((stamp if i == 0 else indent) + text for i, text in enumerate(lines)))
        if following:
            bar.setValue(bar.maximum())
