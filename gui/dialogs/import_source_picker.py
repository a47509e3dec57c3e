"""Import from PyTorch, first question: a program file or a Hugging Face folder?

A file picker cannot pick folders and a folder picker cannot pick files, so the user says which
they have (`ask_source_kind`), then gets the one picker that fits (`pick_source`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

FILE, FOLDER = "file", "folder"
FILE_BUTTON = "Program file (.pt, .pt2)…"
FOLDER_BUTTON = "Hugging Face folder…"
QUESTION = ("What do you want to import?\n\n"
            "A program file: a TorchScript .pt or a torch.export .pt2.\n"
            "A Hugging Face folder: a model folder with config.json and its weights.")


def source_kind_box(parent: QWidget | None) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Question, "Import from PyTorch", "", QMessageBox.StandardButton.Cancel, parent)
    box.setObjectName("importSourceKind")
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(QUESTION)
    box.addButton(FILE_BUTTON, QMessageBox.ButtonRole.AcceptRole).setObjectName(FILE)
    box.addButton(FOLDER_BUTTON, QMessageBox.ButtonRole.AcceptRole).setObjectName(FOLDER)
    return box


def ask_source_kind(parent: QWidget | None) -> str | None:
    """FILE, FOLDER, or None when the user cancelled."""
    box = source_kind_box(parent)
    box.exec()
    clicked = box.clickedButton()
    kind = clicked.objectName() if clicked is not None else ""
    box.deleteLater()
    return kind if kind in (FILE, FOLDER) else None


def pick_source(parent: QWidget | None, folder: str = "") -> Path | None:
    kind = ask_source_kind(parent)
    if kind == FOLDER:
        path = QFileDialog.getExistingDirectory(parent, "Hugging Face model folder", folder)
    elif kind == FILE:
        path, _ = QFileDialog.getOpenFileName(parent, "PyTorch program", folder, "PyTorch programs (*.pt *.pt2)")
    else:
        return None
    return Path(path) if path else None
