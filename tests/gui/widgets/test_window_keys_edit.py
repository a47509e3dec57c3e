"""The window's shortcuts work while the filter box has focus (issue 35): on X11 a QLineEdit claims
Ctrl+E (end of line) and Ctrl+D (delete), so Export and Deploy did nothing there."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtTest import QTest

from onnxport.gui.dialogs.export_dialog import ExportDialog

from ..test_main_window import open_example

pytestmark = pytest.mark.gui


def claimed(edit, key, modifiers) -> bool:
    """Whether `edit` claims the key before shortcuts see it (what Qt asks it first)."""
    event = QKeyEvent(QEvent.Type.ShortcutOverride, key, modifiers)
    event.ignore()
    edit.event(event)
    return event.isAccepted()


def test_a_window_shortcut_wins_over_the_line_edits_own_binding(qtbot, window):
    """Ctrl+A is "select all" in a line edit on every platform: with a window action on it (as Ctrl+E
    is Export where X11's bindings make it "end of line"), the action runs, not the binding."""
    edit = window.left.filter_edit
    assert claimed(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # the line edit's own binding
    runs = []
    action = QAction("test", window, shortcut=QKeySequence("Ctrl+A"), triggered=lambda: runs.append(1))
    window.addAction(action)
    assert not claimed(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    action.setEnabled(False)  # a disabled action: the key edits again
    assert claimed(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert claimed(edit, Qt.Key.Key_E, Qt.KeyboardModifier.NoModifier)  # typing is typing
    assert not claimed(window.preview.search.box, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)


def test_ctrl_e_in_the_filter_box_opens_the_export_dialog(qtbot, window, example):
    open_example(qtbot, window, example)
    window.activateWindow()
    edit = window.left.filter_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus, timeout=300_000)
    QTest.keyClicks(edit, "relu")
    QTest.keyClick(edit, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.findChild(ExportDialog) is not None, timeout=300_000)
    assert edit.text() == "relu"
    window.findChild(ExportDialog).reject()
