"""Process-wide settings belong to the entry point: building and using a window changes none;
`tune_process` (what main() calls) sets them."""

from __future__ import annotations

import gc
import sys

import pytest

from onnxport.gui.app import SWITCH_INTERVAL_S, tune_process
from onnxport.gui.jobs.quiet_gc import freeze_survivors, quiet_gc

pytestmark = pytest.mark.gui


def test_a_window_opening_a_model_changes_no_process_wide_state(qtbot, settings, example):
    from onnxport.gui.main_window import MainWindow

    interval, frozen, enabled = sys.getswitchinterval(), gc.get_freeze_count(), gc.isenabled()
    window = MainWindow(settings=settings)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(example)  # opened under quiet_gc in the worker
    qtbot.waitUntil(lambda: not window.busy and not window.runner.side_jobs, timeout=300_000)
    assert (sys.getswitchinterval(), gc.get_freeze_count(), gc.isenabled()) == (interval, frozen, enabled)


def test_tune_process_sets_what_main_sets(qtbot):
    interval, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    try:
        tune_process()
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        with quiet_gc():
            built = [[i] for i in range(1000)]
        # the freeze comes when the outermost block ends: a side job of an earlier window may
        # still be inside one, so wait for it rather than assume this block was the outermost
        qtbot.waitUntil(lambda: gc.get_freeze_count() > frozen, timeout=300_000)
        assert built
    finally:
        sys.setswitchinterval(interval)
        freeze_survivors(False)
        gc.unfreeze()
