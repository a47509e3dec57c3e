"""A line edit in which the window's own shortcuts still work (the outputs filter, the graph's find box).

Why: a QLineEdit claims the keys of its editing bindings before any shortcut sees them; on X11
those include Ctrl+E (end of line) and Ctrl+D (delete), so Export and Deploy did nothing while
the filter box had focus. `WindowKeysEdit` lets go of a key that an enabled action of its window
has as its shortcut: the action runs; every other key edits as before.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLineEdit


class WindowKeysEdit(QLineEdit):
    def event(self, event: QEvent) -> bool:  # Qt override
        if event.type() == QEvent.Type.ShortcutOverride and self._window_shortcut(QKeySequence(event.keyCombination())):
            event.ignore()  # not claimed: the shortcut goes to the window's action
            return True
        return super().event(event)

    def _window_shortcut(self, keys: QKeySequence) -> bool:
        return any(action.isEnabled() and keys in action.shortcuts()
                   for action in self.window().findChildren(QAction))
