"""`ElidedLabel`: one line of plain text, cut with "…" to the width it has; the whole text in its
tooltip. `text()` is the whole text. Used where a status must never wrap into a tall block (the
preview's status line, above the graph).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from .plain_text import plain_tip


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)  # tensor names and errors: text, never markup
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._full = ""
        self.setText(text)

    def text(self) -> str:
        return self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        self._full = text
        self.setToolTip(plain_tip(text))
        self._elide()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        line = " ".join(self._full.split())  # one line: newlines and runs of spaces as one space
        super().setText(self.fontMetrics().elidedText(line, Qt.TextElideMode.ElideRight, max(0, self.width())))
