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
    with qtbot.waitSignal(window.loaded, timeout=20_000):
        window.open_paths(example)  # opened under quiet_gc in the worker
    qtbot.waitUntil(lambda: not window.busy and not window.runner.side_jobs, timeout=30_000)
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
        qtbot.waitUntil(lambda: gc.get_freeze_count() > frozen, timeout=30_000)
        assert built
    finally:
        sys.setswitchinterval(interval)
        freeze_survivors(False)
        gc.unfreeze()


def test_the_app_entry_point_restarts_tuned_before_anything_runs(monkeypatch):
    """`onnxport-gui` and `python -m onnxport.gui` run `run`: glibc's malloc tuned first
    (core/util/malloc_tuning.py), then `main`."""
    from onnxport.core.util import malloc_tuning
    from onnxport.gui import app

    calls = []
    monkeypatch.setattr(malloc_tuning, "reexec_tuned", lambda: calls.append("reexec"))
    monkeypatch.setattr(app, "main", lambda: calls.append("main") or 0)
    with pytest.raises(SystemExit):
        app.run()
    assert calls == ["reexec", "main"]
