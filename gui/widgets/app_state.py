"""What the app remembers between runs (QSettings): recent files, the last folder opened, the
window's geometry and dock/toolbar layout. The export and deploy dialogs keep their folders there.

The settings file is read as a stranger's: `AppState` checks every entry once, when it is made
(`recent=5`, a list 100,000 deep or of numbers, a folder that is a list crashed the app at every
start until the file was deleted): a bad entry is dropped from the file and said once in
`dropped` (the window logs it). The default file (`default_settings`) is read only when it is a
regular file: a FIFO in its place would hang the start for good; then nothing is kept this run.
`AppState(QSettings(...))` in tests points it at a file of their own.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QByteArray, QCoreApplication, QSettings, QStandardPaths
from PySide6.QtWidgets import QMainWindow, QMenu

from .plain_text import plain_tip

MAX_RECENT = 8
MAX_FILES_PER_ENTRY = 16  # files opened together in one recent entry
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_RECENT_CHARS = 1 << 16  # the JSON that holds them (what `remember_recent` writes stays under it)
MAX_LAYOUT_BYTES = 1 << 16  # saveGeometry/saveState are a few hundred bytes
FOLDER_KEYS = ("open/folder", "export/folder", "deploy/folder")
LAYOUT_KEYS = ("window/geometry", "window/state")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_INNERMOST = re.compile(r"[\[{][^\[\]{}]*[\]}]")
LAYOUT_VERSION = 2  # the docks' layout (main_layout.py): 2 = the graph in the middle, panels in docks


def default_settings() -> tuple[QSettings, str | None]:
    """The app's settings (organization and application name set first) and, when its file is not
    a regular file, the line saying so; then the settings live in a folder of this run's only."""
    if sys.platform in ("darwin", "win32"):  # a property list or the registry, not a file we read
        return QSettings(), None
    config = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation))
    org, app = QCoreApplication.organizationName(), QCoreApplication.applicationName()
    for path in (config / org / f"{app}.conf", config / f"{org}.conf"):  # what QSettings() reads
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            private = Path(tempfile.mkdtemp(prefix="onnxport-settings-")) / f"{app}.conf"
            return (QSettings(str(private), QSettings.Format.IniFormat),
                    f"settings: {path} is not a regular file; settings are not kept this run")
    return QSettings(), None


class AppState:
    def __init__(self, settings: QSettings | None = None) -> None:
        said = None
        if settings is None:
            settings, said = default_settings()
        self.settings = settings
        self.dropped: list[str] = [said] if said else []  # what was wrong with the file, said once
        bad = self._drop_bad_entries()
        if bad:
            self.dropped.append(f"settings: dropped {'; '.join(bad)} from {settings.fileName()}")

    # --- reading the file as a stranger's --------------------------------------------------------
    def _drop_bad_entries(self) -> list[str]:
        """Drop each entry of a wrong type or size (see the module docstring); what was dropped."""
        bad = []
        for key in FOLDER_KEYS:
            value = self.settings.value(key)
            if value is not None and not _is_path(value):
                bad.append(f"{key} (not a folder name)")
        for key in LAYOUT_KEYS:
            value = self.settings.value(key)
            if value is not None and not (isinstance(value, (QByteArray, bytes)) and len(value) <= MAX_LAYOUT_BYTES):
                bad.append(f"{key} (not a saved window layout)")
        for entry in bad:
            self.settings.remove(entry.split(" ")[0])
        raw = self.settings.value("recent")
        if raw is not None:
            kept, dropped = _recent_entries(raw)
            if dropped:
                self.settings.setValue("recent", json.dumps(kept))
                bad.append(f"{dropped} unreadable recent file entr{'y' if dropped == 1 else 'ies'}")
        return bad

    # --- the folder of the last files opened ---------------------------------------------------
    @property
    def open_folder(self) -> str:
        value = self.settings.value("open/folder", str(Path.home()))
        return value if _is_path(value) else str(Path.home())

    @open_folder.setter
    def open_folder(self, folder: str | Path) -> None:
        self.settings.setValue("open/folder", str(folder))

    # --- recent files ----------------------------------------------------------------------------
    def recent(self) -> list[list[str]]:
        """The last sets of files opened together, newest first (resolved paths)."""
        return _recent_entries(self.settings.value("recent", "[]"))[0]

    def remember_recent(self, paths: list[Path]) -> None:
        """Put this set of files first; the oldest go while the list is over its bounds."""
        entry = [str(p.resolve()) for p in paths]
        recent = [entry] + [r for r in self.recent() if r != entry]
        recent = [r for r in recent if len(r) <= MAX_FILES_PER_ENTRY and all(map(_is_path, r))][:MAX_RECENT]
        while recent and len(json.dumps(recent)) > MAX_RECENT_CHARS:
            recent.pop()
        self.settings.setValue("recent", json.dumps(recent))

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
        geometry, state = (self.settings.value(key) for key in LAYOUT_KEYS)
        if isinstance(geometry, (QByteArray, bytes)):
            window.restoreGeometry(geometry)
        if isinstance(state, (QByteArray, bytes)):
            window.restoreState(state, LAYOUT_VERSION)  # an older layout's: ignored

    def save_window(self, window: QMainWindow) -> None:
        self.settings.setValue("window/geometry", window.saveGeometry())
        self.settings.setValue("window/state", window.saveState(LAYOUT_VERSION))


def _is_path(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_PATH_CHARS and "\0" not in value


def _recent_entries(raw: object) -> tuple[list[list[str]], int]:
    """The well-formed entries of a stored recent list (at most MAX_RECENT), and how many were not.
    The text is bounded before it is parsed, and only a list of lists of paths is read: the
    nesting a 100,000-deep list asks for is never walked."""
    if not isinstance(raw, str) or len(raw) > MAX_RECENT_CHARS:
        return [], 1
    try:
        parsed = json.loads(raw) if _at_most_two_deep(raw) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, list):
        return [], 1
    kept = [e for e in parsed if isinstance(e, list) and 0 < len(e) <= MAX_FILES_PER_ENTRY
            and all(_is_path(p) for p in e)]
    return kept[:MAX_RECENT], len(parsed) - len(kept)


def _at_most_two_deep(text: str) -> bool:
    """Whether `[`/`{` nest at most twice in JSON `text` (brackets inside strings left out): what
    `json.loads` may recurse into. Two passes remove the innermost brackets; none may be left."""
    text = _JSON_STRING.sub('""', text)
    for _ in range(2):
        text = _INNERMOST.sub("0", text)
    return not any(c in text for c in "[]{}")
