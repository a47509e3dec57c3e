"""What the app remembers: recent file sets (newest first, no duplicates, at most MAX_RECENT),
the folder opened last, the window layout; a damaged entry is forgotten, not an error."""

from __future__ import annotations

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
