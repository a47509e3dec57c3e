"""`make screenshots` (issue 15, cut 13): the app under its own Xvfb exits cleanly (the app is shut
down before the X server), and the system packages it needs are listed and installed or named."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {scripts!r})
    os.environ.pop("DISPLAY", None)
    import screenshots
    xvfb = screenshots.start_xvfb()
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    from onnxport.gui.app import prepare_environment
    prepare_environment()
    from PySide6.QtCore import QCoreApplication, QSettings, Qt
    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
    import PySide6.QtWebEngineWidgets
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from onnxport.gui.main_window import MainWindow
    window = MainWindow(settings=QSettings({settings!r}, QSettings.IniFormat))
    window.show()
    for _ in range(50):
        app.processEvents()
    if {proper}:
        screenshots.close_app(app)  # the order make screenshots uses
    xvfb.terminate()
    xvfb.wait(timeout=10)
    print("child done", flush=True)
    if not {proper}:  # the app still up when its X server went: its next X round trip fails
        window.update()
        for _ in range(50):
            app.processEvents()
""")


def run_child(tmp_path, proper: bool) -> subprocess.CompletedProcess:
    code = CHILD.format(scripts=str(ROOT / "scripts"), settings=str(tmp_path / "s.ini"), proper=proper)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (make screenshots installs it)")
def test_the_app_under_its_own_xvfb_exits_cleanly(tmp_path):
    done = run_child(tmp_path, proper=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "child done" in done.stdout and "X11 connection broke" not in done.stderr
    # the control: the X server stopped under a live app is what failed before
    broken = run_child(tmp_path, proper=False)
    assert "X11 connection broke" in broken.stderr


def test_readme_lists_the_packages_the_makefile_installs():
    makefile = (ROOT / "Makefile").read_text()
    block = re.search(r"^APP_DEBS := (.*?)\n(?=\S)", makefile, re.S | re.M).group(1)
    app_debs = set(block.replace("\\", " ").split())
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"sudo apt-get install (.*?)\n```", readme, re.S).group(1)
    assert set(command.replace("\\", " ").split()) == app_debs
    assert {"libxcb-icccm4", "libxcb-keysyms1", "libxcb-cursor0"} <= app_debs  # what Qt's xcb plugin loads
    assert re.search(r"^SCREENSHOT_DEBS := xvfb fonts-wqy-zenhei \$\(APP_DEBS\)", makefile, re.M)
    assert "need_debs.sh $(SCREENSHOT_DEBS)" in makefile


def test_need_debs_names_what_is_missing_in_one_line():
    script = ROOT / "scripts" / "need_debs.sh"
    env = dict(os.environ, ONNXPORT_NO_APT="1")
    ok = subprocess.run(["sh", str(script), "dpkg"], capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0 and not ok.stdout and not ok.stderr
    missing = subprocess.run(["sh", str(script), "dpkg", "onnxport-not-a-package"], capture_output=True, text=True,
                             env=env, timeout=600)
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("missing Debian packages: onnxport-not-a-package "
                                      "(install them: sudo apt-get install onnxport-not-a-package)")
