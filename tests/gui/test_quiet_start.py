"""A quiet start: the app's window, its preview drawn, prints none of Chromium's log lines nor the
known graphics/console noise on stderr; anything else (and every critical message) still shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from PySide6.QtCore import QtMsgType

from onnxport.gui.app import chromium_flags
from onnxport.gui.preview.qt_noise import is_noise

pytestmark = pytest.mark.gui

CHROMIUM_LINE = re.compile(r"^\[\d+:\d+:\d+/\d+\.\d+:")
START = """
import sys, tempfile, time
from pathlib import Path
from onnxport.gui.app import prepare_environment
from onnxport.gui.preview.qt_noise import quiet_qt_messages
prepare_environment()
quiet_qt_messages()  # as main() does
from PySide6.QtCore import QCoreApplication, QSettings, Qt, QTimer, qWarning
QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
import PySide6.QtWebEngineWidgets
from PySide6.QtWidgets import QApplication
app = QApplication([])
from onnxport.gui.main_window import MainWindow
from onnxport.resources import example_files
window = MainWindow(settings=QSettings(str(Path(tempfile.mkdtemp()) / "s.ini"), QSettings.IniFormat))
window.show()
window.open_paths([str(p) for p in example_files()])
end = time.perf_counter() + 300  # bounds against a hang, not measurements
while window.session is None and time.perf_counter() < end:
    app.processEvents(); time.sleep(0.01)
drawn = window.preview.wait_rendered(300)
qWarning("a message nobody filters")
window.close()
QTimer.singleShot(0, app.quit)  # the close's events run; whatever WebEngine says after is read to exit
app.exec()
print("drawn", drawn)
"""


def test_starting_the_window_prints_no_chromium_noise(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", START], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 0  # the preview was drawn: WebEngine did start
    lines = done.stderr.splitlines()
    assert not [line for line in lines if CHROMIUM_LINE.match(line)], done.stderr
    assert not [line for line in lines if is_noise(QtMsgType.QtWarningMsg, None, line)], done.stderr
    assert "a message nobody filters" in done.stderr


def test_only_known_noise_is_filtered():
    assert is_noise(QtMsgType.QtWarningMsg, "default", "QRhiGles2: Failed to create context")
    assert is_noise(QtMsgType.QtInfoMsg, "js", "Uncaught TypeError: anything the page logs")
    assert not is_noise(QtMsgType.QtCriticalMsg, "js", "Uncaught TypeError")  # critical always shows
    assert not is_noise(QtMsgType.QtWarningMsg, "default", "QThread: Destroyed while thread is still running")


def test_chromium_logs_fatal_only_unless_the_user_asks():
    assert "--log-level=3" in chromium_flags("--no-sandbox", as_root=False).split()
    assert chromium_flags("--log-level=0", as_root=False).count("--log-level") == 1
    assert "--log-level" not in chromium_flags("--enable-logging=stderr", as_root=False)
