"""The app's boundary (issue 36, item 4): an exception raised in a slot, in a Python thread or
before the event loop runs is one log entry, one line on stderr without a traceback, and a dialog
(one at a time); a quiet side job's exception nobody listens for goes to the log, never lost."""

from __future__ import annotations

import sys
import threading

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from onnxport.core.util.error_log import error_log_path
from onnxport.gui.dialogs.error_hook import install_error_hook
from onnxport.gui.jobs.worker import Job

pytestmark = pytest.mark.gui


@pytest.fixture
def hook(qtbot):
    """The hook over pytest-qt's own (which would fail the test on a slot's exception), then back."""
    installed = install_error_hook(QApplication.instance())
    yield installed
    installed.uninstall()
    if installed.box is not None:
        installed.box.close()


def error_boxes() -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMessageBox) and w.objectName() == "errorDialog" and w.isVisible()]


def broken_slot() -> None:
    {}["weights"]


def test_an_exception_in_a_slot_is_a_dialog_and_a_log_entry(qtbot, hook, capfd):
    parent = QWidget()
    qtbot.addWidget(parent)
    parent.show()
    shown = []  # queued after the hook's own slot: it runs once the dialog was (or was not) opened
    hook.raised.connect(lambda *_: shown.append(len(error_boxes())), Qt.ConnectionType.QueuedConnection)
    QTimer.singleShot(0, broken_slot)
    qtbot.waitUntil(lambda: len(error_boxes()) == 1, timeout=300_000)
    box = error_boxes()[0]
    assert box.text() == "Unexpected error (KeyError): 'weights'"
    assert str(error_log_path()) in box.detailedText() and "Traceback" not in box.detailedText()
    log = error_log_path().read_text()
    assert "Unexpected error: KeyError: 'weights'" in log and "in broken_slot" in log
    err = capfd.readouterr().err
    assert "onnxport: internal error: Unexpected error (KeyError): 'weights'" in err and "Traceback" not in err
    QTimer.singleShot(0, broken_slot)  # a second one while the box is open: the log only
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=300_000)
    assert shown == [1, 1] and error_boxes() == [box] and error_log_path().read_text().count("\n=== ") == 1


def test_an_exception_ending_a_thread_is_a_dialog_too(qtbot, hook):
    def run() -> None:
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    thread = threading.Thread(target=run, name="reader")
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: len(error_boxes()) == 1, timeout=300_000)
    assert error_boxes()[0].text().startswith("Unexpected error (RecursionError): maximum recursion")
    assert "Unexpected error (thread reader): RecursionError" in error_log_path().read_text()


def test_an_exception_before_the_event_loop_still_says_one_line(qtbot, hook, capfd):
    try:
        int("²")  # e.g. while the window is built, before app.exec()
    except ValueError:
        sys.excepthook(*sys.exc_info())  # what Python does with an exception main() let through
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(error_log_path()) in err
    assert "ValueError: invalid literal for int()" in error_log_path().read_text()


def test_a_side_jobs_exception_nobody_listens_for_goes_to_the_log(qtbot):
    def fail(progress, cancel):
        raise AssertionError("scale issue")

    job = Job(fail, "types")
    with qtbot.waitSignal(job.signals.finished, timeout=300_000):
        job.start()
    text = error_log_path().read_text()
    assert "types (a background job): AssertionError: scale issue" in text and "in fail" in text


def test_a_jobs_exception_someone_shows_is_not_logged_twice(qtbot):
    def fail(progress, cancel):
        raise AssertionError("scale issue")

    job = Job(fail, "export")
    seen = []
    job.signals.errored.connect(lambda exc, tb: seen.append(exc))
    with qtbot.waitSignal(job.signals.finished, timeout=300_000):
        job.start()
    assert len(seen) == 1 and not error_log_path().exists()  # the window's dialog logs it
