"""What the app remembers: recent file sets (newest first, no duplicates, at most MAX_RECENT),
the folder opened last, the window layout; a damaged entry is dropped and said once, not an error
(issue 36, item 5: `recent=5`, a 100,000-deep list, numbers crashed every start); a settings file
that is a FIFO never blocks the start."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMainWindow, QMenu

from onnxport.gui.widgets.app_state import MAX_RECENT, AppState

pytestmark = pytest.mark.gui


def test_recent_files_newest_first_without_duplicates(qtbot, settings, tmp_path):
    state = AppState(settings)
    assert state.recent() == [] and state.open_folder == str(Path.home())
    for i in range(MAX_RECENT + 2):
        state.remember_recent([tmp_path / f"m{i}.onnx", tmp_path / "checkpoint"])
    state.remember_recent([tmp_path / "m3.onnx", tmp_path / "checkpoint"])  # again: moves to the top
    recent = state.recent()
    assert len(recent) == MAX_RECENT
    assert recent[0] == [str((tmp_path / "m3.onnx").resolve()), str((tmp_path / "checkpoint").resolve())]
    assert sum(entry == recent[0] for entry in recent) == 1
    state.open_folder = tmp_path
    assert AppState(settings).open_folder == str(tmp_path)  # kept in the settings, not in the object


def test_recent_menu_opens_an_entry_and_is_off_when_empty(qtbot, settings, tmp_path):
    state = AppState(settings)
    menu = QMenu()
    opened = []
    state.fill_recent_menu(menu, opened.append)
    assert not menu.isEnabled() and menu.actions() == []
    state.remember_recent([tmp_path / "eval_model.onnx", tmp_path / "checkpoint"])
    state.fill_recent_menu(menu, opened.append)
    assert menu.isEnabled() and [a.text() for a in menu.actions()] == ["eval_model.onnx + checkpoint"]
    menu.actions()[0].trigger()
    assert opened == [[str((tmp_path / "eval_model.onnx").resolve()), str((tmp_path / "checkpoint").resolve())]]


def test_a_damaged_recent_list_is_forgotten(qtbot, settings):
    settings.setValue("recent", "{not json")
    assert AppState(settings).recent() == []


def test_window_layout_round_trip(qtbot, settings):
    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(640, 480)
    AppState(settings).save_window(window)
    assert settings.value("window/geometry") and settings.value("window/state") is not None
    again = QMainWindow()
    qtbot.addWidget(again)
    AppState(settings).restore_window(again)
    assert again.size().width() == 640 and again.size().height() == 480


DEEP = "[" * 100_000 + "]" * 100_000
BAD_FILES = {  # what was found to crash the app at every start (issue 36, item 5), and kin
    "a number": ("[General]\nrecent=5\n", "recent"),
    "numbers": ('[General]\nrecent="[[1,2]]"\n', "recent"),
    "a deep list": (f"[General]\nrecent={DEEP}\n", "recent"),
    "a deep quoted list": (f'[General]\nrecent="{DEEP}"\n', "recent"),
    "a list of names": ("[General]\nrecent=a, b\n", "recent"),
    "a folder that is a list": ("[open]\nfolder=a, b\n", "open/folder"),
    "a layout that is text": ("[window]\ngeometry=abc\nstate=5\n", "window/geometry"),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_settings_entry_is_dropped_and_said_once(qtbot, tmp_path, name):
    from PySide6.QtCore import QSettings

    from onnxport.gui.main_window import MainWindow

    text, key = BAD_FILES[name]
    path = tmp_path / "settings.ini"
    path.write_text(text)
    window = MainWindow(settings=QSettings(str(path), QSettings.IniFormat))  # crashed here
    qtbot.addWidget(window)
    said = [line for line in window.log.toPlainText().splitlines() if "settings: dropped" in line]
    assert len(said) == 1 and key in said[0] and str(path) in said[0]
    window.settings.sync()
    again = AppState(QSettings(str(path), QSettings.IniFormat))
    assert again.dropped == [] and again.recent() == []  # dropped from the file: said once, not at each start
    assert again.open_folder == str(Path.home())


def test_good_recent_entries_are_kept_beside_bad_ones(qtbot, settings, tmp_path):
    good = [str(tmp_path / "m.onnx"), str(tmp_path / "checkpoint")]
    settings.setValue("recent", json.dumps([good, 5, [1], "x", [], [str(tmp_path / "b.onnx")]]))
    state = AppState(settings)
    assert state.recent() == [good, [str(tmp_path / "b.onnx")]]
    assert state.dropped == [f"settings: dropped 4 unreadable recent file entries from {settings.fileName()}"]
    assert AppState(settings).dropped == []


def test_the_recent_list_written_stays_readable(qtbot, settings, tmp_path):
    state = AppState(settings)
    long_name = "d" * 200
    for i in range(MAX_RECENT):  # entries of 16 long paths each: over the size bound together
        state.remember_recent([tmp_path / long_name / f"{i}-{j}.onnx" for j in range(16)])
    assert 0 < len(AppState(settings).recent()) <= MAX_RECENT and AppState(settings).dropped == []


def test_a_settings_file_that_is_a_fifo_never_blocks_the_start(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QCoreApplication

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(QCoreApplication, "organizationName", lambda: "onnxport")
    monkeypatch.setattr(QCoreApplication, "applicationName", lambda: "onnxport")
    fifo = tmp_path / "config" / "onnxport" / "onnxport.conf"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)  # QSettings() would wait for a writer, for good
    state = AppState()
    assert state.dropped == [f"settings: {fifo} is not a regular file; settings are not kept this run"]
    state.open_folder = tmp_path
    assert state.open_folder == str(tmp_path) and not Path(state.settings.fileName()).is_relative_to(tmp_path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # left as it is
