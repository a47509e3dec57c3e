"""`later` runs its work after the timers (and input) already due: split work never freezes the
window for the sum of its parts, as work chained with posted events (`QTimer.singleShot(0)`) does."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gui


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def run_stages(qtbot, schedule) -> list[str]:
    """Stage one runs 30 ms, during which a 5 ms timer falls due, then schedules stage two."""
    from PySide6.QtCore import QObject, QTimer

    order: list[str] = []
    owner = QObject()
    due = QTimer(owner, singleShot=True, interval=5, timeout=lambda: order.append("due timer"))

    def one():
        due.start()
        busy(30)
        order.append("stage one")
        schedule(owner, lambda: order.append("stage two"))

    QTimer.singleShot(1, owner, one)
    qtbot.waitUntil(lambda: len(order) == 3, timeout=300_000)
    return order


def test_later_lets_the_due_timers_run_between_stages(qtbot):
    from onnxport.gui.widgets.turns import later

    assert run_stages(qtbot, later) == ["stage one", "due timer", "stage two"]


def test_a_posted_stage_runs_before_the_due_timers(qtbot):
    """Why `later` exists: the posted event's stage runs first (the window froze for both stages)."""
    from PySide6.QtCore import QTimer

    assert run_stages(qtbot, lambda owner, fn: QTimer.singleShot(0, owner, fn)) == ["stage one", "stage two", "due timer"]
