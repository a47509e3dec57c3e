"""The status bar's view of the main job: a message, a progress bar and Cancel.

Progress and Cancel stay in place (disabled when idle): showing/hiding them would re-layout and
repaint the whole window at the start of every job; for the same reason a changing message does
not re-layout the bar (its size policy is Ignored). A new value is painted with the window's next
frame: `QProgressBar.setValue` repaints the bar at once, in the middle of the progress signal
(a GUI-thread stall per step reported). And a
progress signal that changes nothing shown paints nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QProgressBar, QPushButton, QSizePolicy, QStatusBar

from .plain_text import plain_label

STEPS = 100  # the bar's range: a step is a percent, the most its text shows; finer steps repainted
# it at every progress signal (20 a second) for changes nobody could see


class JobStatus:
    def __init__(self, bar: QStatusBar, on_cancel: Callable[[], None]) -> None:
        self.progress = QProgressBar(maximumWidth=260, textVisible=True)
        self.progress.setEnabled(False)
        self.progress.setFormat("")
        self.text = plain_label()  # progress lines name tensors and files
        self.text.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.cancel_button = QPushButton("Cancel", clicked=on_cancel)
        self.cancel_button.setEnabled(False)
        bar.addWidget(self.text, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)

    def busy(self, name: str) -> None:
        """A job started: progress of unknown length until it reports some; Cancel on."""
        self.progress.setRange(0, 0)
        self.progress.setFormat("%p%")
        self.progress.setEnabled(True)
        self.cancel_button.setEnabled(True)
        self.text.setText(f"{name}…")

    def show_progress(self, fraction: float | None, message: str) -> None:
        if fraction is None:
            self._set_bar(0)
        else:
            self._set_bar(STEPS, int(STEPS * fraction))
        self.text.setText(message)  # the same text again changes nothing (QLabel compares)

    def idle(self) -> None:
        self._set_bar(STEPS, 0)
        self.progress.setFormat("")
        self.progress.setEnabled(False)
        self.cancel_button.setEnabled(False)
        self.text.setText("ready")

    def _set_bar(self, maximum: int, value: int | None = None) -> None:
        """Range 0..`maximum` (0: busy) and `value`, painted with the next frame (see the module
        docstring): with updates off, setValue's repaint waits; turning them on schedules it. A
        bar already there is left alone: turning updates on repaints even an unchanged bar."""
        if self.progress.maximum() == maximum and (value is None or self.progress.value() == value):
            return
        self.progress.setUpdatesEnabled(False)
        self.progress.setRange(0, maximum)
        if value is not None:
            self.progress.setValue(value)
        self.progress.setUpdatesEnabled(True)
