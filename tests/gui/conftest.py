"""GUI test fixtures: a real MainWindow with its own settings file, models built on the spot."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.resources import example_files
from tests.support.checkpoint_writer import write_checkpoint

pytestmark = pytest.mark.gui

# The app's own Chromium flags (privacy switches; gui/app.py composes them in main(), which these
# tests bypass), added to what the environment already says (--no-sandbox), before Qt starts.
from onnxport.gui.app import prepare_environment  # noqa: E402

prepare_environment()

# WebEngine must be loaded (and GL contexts shared) before pytest-qt creates the QApplication.
from PySide6.QtCore import QCoreApplication, Qt  # noqa: E402

QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
import PySide6.QtWebEngineWidgets  # noqa: E402, F401


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(qtbot):
    """After each test, wait for every pool thread to finish: a job left running from one test
    (a side job of a window closed without the `window` fixture) holds a pool thread and keeps the
    cycle collector quiet (quiet_gc) while the next test runs."""
    yield
    from PySide6.QtCore import QThreadPool

    from onnxport.gui.jobs.runner import serial_lane

    pools = (QThreadPool.globalInstance(), serial_lane())
    qtbot.waitUntil(lambda: all(pool.activeThreadCount() == 0 for pool in pools), timeout=300_000)


@pytest.fixture(autouse=True)
def own_cache_folder(tmp_path, monkeypatch):
    """The error log (gui/dialogs/error_log.py) goes to the test's folder, never the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def settings(tmp_path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


@pytest.fixture
def window(qtbot, settings):
    from onnxport.gui.main_window import MainWindow

    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    yield win
    if win.job is not None:
        win.job.cancel()
        qtbot.waitUntil(lambda: win.job is None, timeout=300_000)
    # side jobs (plan, preview, types...) too: one left running holds a thread of the shared pool
    # (2 on a 2-core machine), and the next test's jobs would queue behind it
    win.runner.drop_all()
    qtbot.waitUntil(lambda: not win.runner.side_jobs, timeout=300_000)


@pytest.fixture
def example(tmp_path) -> list[Path]:
    """The bundled example (eval model + trained checkpoint), copied so tests may scribble."""
    folder = tmp_path / "example"
    folder.mkdir()
    return [Path(shutil.copy(p, folder / p.name)) for p in example_files()]


def big_eval_model(folder: Path, tensors: int = 40, width: int = 1 << 20) -> list[Path]:
    """An ORT-style eval graph (parameters are inputs, a loss is the only output) whose checkpoint
    holds `tensors` float32 vectors of `width` values (40 x 4 MB by default): big enough that an
    export reports progress many times, so it can be cancelled midway."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"block{i}.bias" for i in range(tensors)]
    nodes, current = [], "x"
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Add", [current, name], [f"h{i}"], name=f"/block{i}/Add"))
        current = f"h{i}"
    nodes.append(helper.make_node("ReduceSum", [current], ["loss"], name="/loss/ReduceSum", keepdims=0))
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [1, width])]
    inputs += [helper.make_tensor_value_info(n, T.FLOAT, [width]) for n in names]
    graph = helper.make_graph(nodes, "big", inputs, [helper.make_tensor_value_info("loss", T.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, folder / "eval_model.onnx")
    rng = np.random.default_rng(0)
    write_checkpoint(folder / "checkpoint", {n: rng.standard_normal(width, dtype=np.float32) for n in names})
    return [folder / "eval_model.onnx", folder / "checkpoint"]
