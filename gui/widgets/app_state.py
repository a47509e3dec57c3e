"""What the app remembers between runs (QSettings): recent files, the last folder opened, the
window's geometry and dock/toolbar layout. The export dialog keeps its own folder there too.

Kept out of the main window so the window is about widgets; `AppState(QSettings(...))` in tests
points it at a file of their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMainWindow, QMenu

from .plain_text import plain_tip

MAX_RECENT = 8
LAYOUT_VERSION = 2  # the docks' layout (main_layout.py): 2 = the graph in the middle, panels in docks


class AppState:
    def __init__(self, settings: QSettings | None = None) -> None:
        self.settings = settings or QSettings()

    # --- the folder of the last files opened ---------------------------------------------------
    @property
    def open_folder(self) -> str:
        return self.settings.value("open/folder", str(Path.home()))

    @open_folder.setter
    def open_folder(self, folder: str | Path) -> None:
        self.settings.setValue("open/folder", str(folder))

    # --- recent files ----------------------------------------------------------------------------
    def recent(self) -> list[list[str]]:
        """The last sets of files opened together, newest first (resolved paths)."""
        try:
            return json.loads(self.settings.value("recent", "[]"))
        except (TypeError, ValueError):
            return []

    def remember_recent(self, paths: list[Path]) -> None:
        entry = [str(p.resolve()) for p in paths]
        recent = [entry] + [r for r in self.recent() if r != entry]
        self.settings.setValue("recent", json.dumps(recent[:MAX_RECENT]))

    def fill_recent_menu(self, menu: QMenu, open_paths: Callable[[list[str]], None]) -> None:
        """One action per recent entry ("checkpoint + eval_model.onnx"); the menu is off when empty."""
        menu.clear()
        recent = self.recent()
        for entry in recent:
            act = menu.addAction(" + ".join(Path(p).name for p in entry))
            act.setToolTip(plain_tip("\n".join(entry)))
            act.triggered.connect(lambda _=False, e=entry: open_paths(e))
        menu.setEnabled(bool(recent))

    # --- window layout ---------------------------------------------------------------------------
    def restore_window(self, window: QMainWindow) -> None:
        window.restoreGeometry(self.settings.value("window/geometry", b""))
        window.restoreState(self.settings.value("window/state", b""), LAYOUT_VERSION)  # an older layout's: ignored

    def save_window(self, window: QMainWindow) -> None:
        self.settings.setValue("window/geometry", window.saveGeometry())
        self.settings.setValue("window/state", window.saveState(LAYOUT_VERSION))
