"""`WrappedLabel`: a word-wrapped QLabel that remembers its height for each width.

Why: one layout pass asks a word-wrapped label for its height at a width many times (its minimum,
its hint, its geometry, once more per enclosing box layout), and QLabel lays its whole text
document out again for each answer. The report's rich-text labels (the numbers, the first error
jump, the last export) made a quantize report's one layout pass spend more GUI time on
`QTextDocumentLayout::doLayout` from `QLabel::heightForWidth` than painting the page. The height only changes with the text, the font or the style, so it is
remembered until one of those changes.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QWidget

CACHED_WIDTHS = 64  # a window dragged wider asks for many widths; forget them all past this

FORGETS_ON = {QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.ContentsRectChange}


class WrappedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._heights: dict[int, int] = {}
        self.setWordWrap(True)

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) >= CACHED_WIDTHS:
                self._heights.clear()
            height = self._heights[width] = super().heightForWidth(width)
        return height

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        self._heights.clear()
        super().setText(text)

    def clear(self) -> None:
        self._heights.clear()
        super().clear()

    def setTextFormat(self, text_format: Qt.TextFormat) -> None:  # noqa: N802 - Qt override
        self._heights.clear()
        super().setTextFormat(text_format)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        if event.type() in FORGETS_ON:
            self._heights.clear()
        super().changeEvent(event)
