"""`one_layout_pass(*widgets)`: many visibility and content changes, laid out once, later.

Why: in Qt, showing a child of a visible widget activates the layout of every ancestor up to the
window at once (QWidgetPrivate::setVisible), and a word-wrapped label or a table sized to its
contents makes each pass measure text again. The report's five hide/show changes after a
quantization each cost a layout pass on the GUI thread. Inside the block the widgets' own layouts are disabled, so
those passes stop there; when the block ends they are enabled again and a layout request is
posted: one pass, in a later event-loop turn, before the next paint.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QWidget


@contextmanager
def one_layout_pass(*widgets: QWidget) -> Iterator[None]:
    layouts = [(w, w.layout()) for w in widgets if w.layout() is not None and w.layout().isEnabled()]
    for _widget, layout in layouts:
        layout.setEnabled(False)
    try:
        yield
    finally:
        for widget, layout in layouts:
            layout.setEnabled(True)
            layout.invalidate()
            QCoreApplication.postEvent(widget, QEvent(QEvent.Type.LayoutRequest))
