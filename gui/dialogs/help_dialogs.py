"""The Help menu's answers: the keyboard shortcuts, where the documentation is, the versions.

Everything here is local: the documentation opens as files from this copy of onnxport (README.md
and docs/ next to the package, when it runs from a checkout or an editable install); nothing
leaves the machine. Texts are plain (a QTableWidget's items and a plain-text message box).
"""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, qVersion
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMainWindow,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent  # gui/dialogs/ -> the checkout


def _menu_actions(actions: list[QAction]) -> list[QAction]:
    found = []
    for act in actions:
        found += _menu_actions(act.menu().actions()) if act.menu() is not None else [act]
    return found


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str]]:
    """(what, keys) for every menu action of `window` that has a shortcut, in menu order."""
    rows, seen = [], set()
    for act in _menu_actions(window.menuBar().actions()):
        keys = act.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        what = act.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()
        if keys and (what, keys) not in seen:
            seen.add((what, keys))
            rows.append((what, keys))
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        rows = shortcut_rows(window)
        self.table = QTableWidget(len(rows), 2)
        self.table.setHorizontalHeaderLabels(["Action", "Shortcut"])
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for row, (what, keys) in enumerate(rows):
            self.table.setItem(row, 0, QTableWidgetItem(what))
            self.table.setItem(row, 1, QTableWidgetItem(keys))
        self.table.resizeColumnToContents(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, rejected=self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        row = self.fontMetrics().height() + 8
        self.resize(420, min(600, (len(rows) + 1) * row + 80))  # every row, no empty room


def docs_location(root: Path = PROJECT_ROOT) -> Path | None:
    """The documentation of this copy: its README.md (docs/ beside it), or None when not installed."""
    readme = root / "README.md"
    if readme.is_file():
        return readme
    docs = root / "docs"
    return docs if docs.is_dir() else None


def open_docs(window: QWidget) -> bool:
    """Open the local documentation with the system's viewer; say where it is when there is none."""
    where = docs_location()
    if where is None:
        say(window, "Documentation", "This copy of onnxport was installed without its documentation: README.md "
            "and docs/ are in the project's source.")
        return False
    return open_or_say(window, QUrl.fromLocalFile(str(where)), "Documentation", f"The documentation is {where}.")


def open_or_say(window: QWidget, url: QUrl, title: str, instead: str, opener=QDesktopServices.openUrl) -> bool:
    """Open `url` with the system's handler (a browser, a viewer); when none takes it, say so in a
    box whose text is `instead` (where to find it: plain text) and put the address on the clipboard.
    `opener`: the system's handler (QDesktopServices.openUrl)."""
    if opener(url):
        return True
    QGuiApplication.clipboard().setText(url.toString())
    say(window, title, f"No program on this system opened it. {instead}\n\n(The address is on the clipboard.)")
    return False


def say(window: QWidget, title: str, text: str) -> QMessageBox:
    """An information box showing `text` as plain text, not blocking (`open`)."""
    box = QMessageBox(QMessageBox.Icon.Information, title, "", QMessageBox.StandardButton.Ok, window)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.open()
    return box


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def about_text() -> str:
    """onnxport and what it runs on, one per line."""
    import PySide6

    return "\n".join([
        f"onnxport {_version('onnxport')}",
        "Turns trained models into ONNX inference models: export, quantize, validate, deploy.",
        "",
        f"ONNX Runtime {_version('onnxruntime')}",
        f"onnx {_version('onnx')}",
        f"Qt {qVersion()} (PySide6 {PySide6.__version__})",
        f"Netron {_version('netron')} (the graph preview)",
        f"Python {platform.python_version()}",
    ])


def show_about(window: QWidget) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Information, "About onnxport", "", QMessageBox.StandardButton.Ok, window)
    box.setObjectName("aboutDialog")
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(about_text())
    box.open()
    return box
