"""The installed PySide6 keeps the reference counts of True and None (issue 28): 6.12.0 on CPython
3.11 lost one reference to True per Signal.emit() and one to None per runJavaScript callback, and the
process aborted ("Fatal Python error: bool_dealloc") after a few thousand signals. The app no longer
patches the counts (gui/app.py once added 2^40 through ctypes); the lock and pyproject require a
release without the leak. Children run the loops: a leaking release would abort this process."""

from __future__ import annotations

import os
import subprocess
import sys

SIGNALS = 100_000
CALLBACKS = 20_000

EMIT = r"""
import sys
from PySide6.QtCore import QCoreApplication, QObject, Signal
app = QCoreApplication([])
class Emitter(QObject):
    beat = Signal(int)
emitter = Emitter()
emitter.beat.connect(lambda i: None)
true, none = sys.getrefcount(True), sys.getrefcount(None)
for i in range(int(sys.argv[1])):
    emitter.beat.emit(i)
print(true - sys.getrefcount(True), none - sys.getrefcount(None))
"""

RUN_JAVASCRIPT = r"""
import sys
import PySide6.QtWebEngineWidgets  # noqa: F401 - before the application
from PySide6.QtCore import QTimer
from PySide6.QtWebEngineCore import QWebEnginePage
from PySide6.QtWidgets import QApplication
app = QApplication([])
page = QWebEnginePage()
count, answers = int(sys.argv[1]), []
def start(ok):
    true, none = sys.getrefcount(True), sys.getrefcount(None)
    def answered(result):
        answers.append(result)
        if len(answers) == count:
            answers.clear()
            print(true - sys.getrefcount(True), none - sys.getrefcount(None), flush=True)
            app.quit()
    for i in range(count):
        page.runJavaScript("null", 0, answered)
page.loadFinished.connect(start)
page.setHtml("<html></html>")
QTimer.singleShot(600_000, app.quit)  # a bound against a hang, not a measurement
app.exec()
"""


def _lost(code: str, count: int) -> tuple[int, int]:
    """References to True and None the child lost over `count` calls."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QTWEBENGINE_CHROMIUM_FLAGS": "--no-sandbox"}
    done = subprocess.run([sys.executable, "-c", code, str(count)], capture_output=True, text=True, timeout=900,
                          env=env)
    assert done.returncode == 0 and done.stdout.split(), f"exit {done.returncode}: {done.stderr[-800:]}"
    true, none = map(int, done.stdout.split()[-2:])
    return true, none


def test_signals_keep_the_reference_counts_of_true_and_none():
    true, none = _lost(EMIT, SIGNALS)
    assert abs(true) < SIGNALS // 100 and abs(none) < SIGNALS // 100, (true, none)


def test_javascript_callbacks_keep_the_reference_counts_of_true_and_none():
    true, none = _lost(RUN_JAVASCRIPT, CALLBACKS)
    assert abs(true) < CALLBACKS // 100 and abs(none) < CALLBACKS // 100, (true, none)
