"""Text from files shown as text, never as markup: the one way gui/ puts such text on screen.

Qt takes a string as rich text when it "might be" (QLabel's AutoText, QMessageBox's text, every
tooltip): a tensor or file named `<img src="/dev/zero">` would then make Qt open and read that
file (the window aborted), `<b>x</b>` would show as a bold x. So:
- `plain_label(text)` / `make_plain(label)`: a QLabel whose text format is Qt.PlainText;
- `plain_tip(text)`: a tooltip string that shows `text` as written (escaped, marked as rich
  text so the escapes are read back, line breaks kept);
- `ask(...)` / `message_box(...)`: a QMessageBox whose text format is Qt.PlainText.
Panels that format with HTML on purpose escape every name (`html.escape`) instead.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget


def make_plain(label: QLabel) -> QLabel:
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    label = QLabel(parent)
    make_plain(label)
    label.setText(text)
    return label


def plain_tip(text: str) -> str:
    """A tooltip showing `text` as written, wrapped where long (an empty text stays empty: no
    tooltip). Escaped, runs of spaces kept, and in a paragraph so Qt reads it as rich text."""
    if not text:
        return ""
    escaped = html.escape(text, quote=False).replace("  ", " &nbsp;").replace("\n", "<br>")
    return f"<p>{escaped}</p>"


def message_box(icon: QMessageBox.Icon, title: str, text: str, buttons, parent: QWidget | None) -> QMessageBox:
    box = QMessageBox(icon, title, "", buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    return box


def ask(parent: QWidget | None, title: str, text: str, buttons=None,
        default: QMessageBox.StandardButton = QMessageBox.StandardButton.NoButton) -> QMessageBox.StandardButton:
    """`QMessageBox.question` with `text` shown as plain text; returns the button pressed."""
    if buttons is None:
        buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    box = message_box(QMessageBox.Icon.Question, title, text, buttons, parent)
    if default != QMessageBox.StandardButton.NoButton:
        box.setDefaultButton(default)
    return QMessageBox.StandardButton(box.exec())
