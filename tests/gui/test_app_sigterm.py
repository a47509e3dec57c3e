"""The app, as a real process exporting a ~100 MB model, gets SIGTERM mid-write: it cancels the
job, removes the temps, keeps the old output and exits 143 with one line (gui/app.py). The export
is held right after its first temp exists until the job is cancelled, so the signal comes
mid-write however loaded the machine (no poll racing the write)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from onnxport.core.util.atomic import is_temp_name
from tests.support.marks import wait_for_mark

from .conftest import big_eval_model

pytestmark = pytest.mark.gui

DRIVER = """
import sys
import time
from pathlib import Path

from onnxport.core.util.atomic import AtomicWrite
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
folder = Path(out).parent


# the export's first temp in the output's folder: say so (a file beside the ini), then wait, in
# the job's thread, until the job is cancelled (the SIGTERM's doing)
def held(make):
    def method(self):
        made = make(self)
        job = window.job
        if self.folder == folder and job is not None and not Path(ini + ".writing").exists():
            Path(ini + ".writing").touch()
            while not job.cancel_requested:
                time.sleep(0.005)
        return made
    return method


AtomicWrite.new_file, AtomicWrite.new_dir = held(AtomicWrite.new_file), held(AtomicWrite.new_dir)


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
    writing = tmp_path / "s.ini.writing"
    try:
        wait_for_mark(writing, child, "the export did not start writing")
        caught = any(is_temp_name(p.name) for p in out.parent.iterdir())  # mid-write: its temp is there
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert caught, "the export was not caught mid-write"
    assert child.returncode == 143, stderr
    assert "onnxport: terminated by SIGTERM; unfinished files were removed" in stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b"the user's previous export"
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx"]
