"""The Help menu: keyboard shortcuts, the documentation (local files), about with versions
(help_dialogs.py)."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow


def add_help_menu(window: QMainWindow) -> None:
    from . import help_dialogs

    menu = window.menuBar().addMenu("&Help")
    window.shortcuts_action = QAction("&Keyboard Shortcuts", window, shortcut=QKeySequence("Ctrl+/"),
                                      triggered=lambda: help_dialogs.ShortcutsDialog(window).open())
    window.docs_action = QAction("&Documentation", window, shortcut=QKeySequence.StandardKey.HelpContents,
                                 triggered=lambda: help_dialogs.open_docs(window),
                                 statusTip="Open the README and docs/ of this copy (local files)")
    window.about_action = QAction("&About onnxport", window, triggered=lambda: help_dialogs.show_about(window))
    for act in (window.shortcuts_action, window.docs_action, window.about_action):
        menu.addAction(act)
