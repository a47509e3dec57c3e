"""The Help menu: the keyboard shortcuts listed, the local documentation opened (never a web
address), About naming the versions; and Import from PyTorch asks file or folder first."""

from __future__ import annotations

import importlib.metadata

import onnx
import onnxruntime
import PySide6
import pytest
from PySide6.QtCore import QObject, QTimer, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QKeySequence
from PySide6.QtWidgets import QApplication, QMessageBox

from onnxport.gui.dialogs import help_dialogs
from onnxport.gui.dialogs.import_source_picker import FILE, FOLDER, ask_source_kind

pytestmark = pytest.mark.gui


def native(keys: str) -> str:
    return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)


def test_help_menu_lists_the_shortcuts(qtbot, window):
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus[-2:] == ["View", "Help"]
    rows = dict(help_dialogs.shortcut_rows(window))
    assert list(rows)[0] == "Open" and rows["Open"] == native("Ctrl+O") and rows["Export"] == native("Ctrl+E")  # menu order
    assert rows["Outputs"] == native("Ctrl+1") and rows["Keyboard Shortcuts"] == native("Ctrl+/")
    window.shortcuts_action.trigger()
    dialog = window.findChild(help_dialogs.ShortcutsDialog)
    qtbot.waitUntil(dialog.isVisible, timeout=300_000)
    shown = {dialog.table.item(r, 0).text(): dialog.table.item(r, 1).text() for r in range(dialog.table.rowCount())}
    assert shown == rows
    dialog.close()


class Opened(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


def test_documentation_opens_local_files_only(qtbot, window):
    opened = Opened()
    for scheme in ("file", "http", "https"):
        QDesktopServices.setUrlHandler(scheme, opened, "open")
    try:
        window.docs_action.trigger()
    finally:
        for scheme in ("file", "http", "https"):
            QDesktopServices.unsetUrlHandler(scheme)
    assert len(opened.urls) == 1 and opened.urls[0].isLocalFile()
    path = opened.urls[0].toLocalFile()
    assert path.endswith("README.md") and help_dialogs.docs_location().is_file()


def test_about_names_the_versions(qtbot, window):
    window.about_action.trigger()
    box = window.findChild(QMessageBox, "aboutDialog")
    qtbot.waitUntil(box.isVisible, timeout=300_000)
    text = box.text()
    for version in (importlib.metadata.version("onnxport"), onnxruntime.__version__, onnx.__version__,
                    PySide6.__version__, importlib.metadata.version("netron")):
        assert version in text
    assert "ONNX Runtime" in text and "Netron" in text
    box.close()


@pytest.mark.parametrize("kind", [FILE, FOLDER])
def test_import_asks_file_or_folder(qtbot, kind):
    def click() -> None:
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox) and "(Cancel to pick" not in box.text()
        next(b for b in box.buttons() if b.objectName() == kind).click()

    QTimer.singleShot(50, click)
    assert ask_source_kind(None) == kind


def test_import_cancelled_picks_nothing(qtbot):
    QTimer.singleShot(50, lambda: QApplication.activeModalWidget().reject())
    assert ask_source_kind(None) is None
