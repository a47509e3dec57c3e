"""The app, as a real process exporting a ~100 MB model, gets SIGTERM mid-write: it cancels the
job, removes the temps, keeps the old output and exits 143 with one line (gui/app.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from onnxport.core.util.atomic import is_temp_name

from .conftest import big_eval_model

pytestmark = pytest.mark.gui

DRIVER = """
import sys
from pathlib import Path

from onnxport.gui.app import handle_sigterm, prepare_environment, tune_process

prepare_environment()
tune_process()
from PySide6.QtCore import QCoreApplication, QSettings, Qt, QTimer

QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
import PySide6.QtWebEngineWidgets  # noqa: F401
from PySide6.QtWidgets import QApplication

app = QApplication([sys.argv[0]])
from onnxport.gui.dialogs.export_dialog import ExportChoices
from onnxport.gui.main_window import MainWindow

model, ckpt, out, ini = sys.argv[1:5]
window = MainWindow(settings=QSettings(ini, QSettings.IniFormat))
window.show()
keep = handle_sigterm(app, window)  # what gui.app.main does


def export_once_loaded():
    if window.session is None or window.busy:
        return
    timer.stop()
    window.start_export(ExportChoices(Path(out), validate=False))  # the user clicks Export


timer = QTimer(interval=20, timeout=export_once_loaded)
timer.start()
window.open_paths([model, ckpt])
sys.exit(app.exec())
"""


def test_sigterm_during_an_export_in_the_app(tmp_path):
    model, ckpt = big_eval_model(tmp_path / "big", tensors=24)
    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    out.write_bytes(b"the user's previous export")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    child = subprocess.Popen([sys.executable, str(driver), str(model), str(ckpt), str(out), str(tmp_path / "s.ini")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        caught = False
        deadline = time.monotonic() + 120  # a bound against a hang, not a measurement
        while child.poll() is None and time.monotonic() < deadline:
            if any(is_temp_name(p.name) for p in out.parent.iterdir()):
                child.send_signal(signal.SIGSTOP)  # freeze it mid-write, then check it really is
                caught = any(is_temp_name(p.name) for p in out.parent.iterdir())
                if caught:
                    child.send_signal(signal.SIGTERM)
                child.send_signal(signal.SIGCONT)
                break
            time.sleep(0.002)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert caught, "the export was not caught mid-write"
    assert child.returncode == 143, stderr
    assert "onnxport: terminated by SIGTERM; unfinished files were removed" in stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b"the user's previous export"
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx"]
