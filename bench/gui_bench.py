"""The app stays responsive: tree build time at 100,000 tensors, GUI-thread stalls during jobs.

    python -m bench gui_bench

1. Tree: a model with 100,000 tensors (node outputs in nested module scopes) is opened the way the
   app opens it (index and plain tree built in the worker); timed on the GUI thread from "worker
   done" to the tree model set on the view, the "Outputs" group expanded and painted
   (`MainWindow.last_tree_seconds`). Reference in the same run: the whole open. Bar: < 1 s.
2. Stalls: a QTimer heartbeat every 10 ms on the GUI thread while the real window (a) opens the
   100,000-tensor model and (b) exports a model with ~800 MB of parameters; the longest gap
   between beats minus the 10 ms period is the longest stall. Bar (export): <= 50 ms; the open's
   stall is reported too.
Writes build/bench/gui_bench.json; exit 1 if a bar is missed. Runs offscreen.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
TREE_TENSORS = 100_000
TREE_BAR_S = 1.0
STALL_BAR_MS = 50.0
BEAT_MS = 10


def wide_model(path: Path, tensors: int = TREE_TENSORS) -> None:
    """`tensors` node outputs: 8 stacks x N layers x 5 ops (scoped like a transformer export)."""
    nodes = []
    per_layer = 5
    layers = tensors // (8 * per_layer)
    outputs = []
    for s in range(8):
        current = "x"
        for layer in range(layers):
            for k in range(per_layer):
                name = f"/stack{s}/layer.{layer}/op{k}/Relu"
                out = f"{name}_output_0"
                nodes.append(helper.make_node("Relu", [current], [out], name=name))
                current = out
        outputs.append(current)
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info(o, T.FLOAT, ["batch", 4]) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def big_export_model(folder: Path, tensors: int = 100, width: int = 2 << 20) -> list[Path]:
    """Eval-like chain of Adds over `tensors` parameter vectors of `width` floats (100 x 8 MB)."""
    from tests.support.checkpoint_writer import write_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    names = [f"block{i}.bias" for i in range(tensors)]
    nodes, current = [], "x"
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Add", [current, name], [f"h{i}"], name=f"/block{i}/Add"))
        current = f"h{i}"
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [1, width])]
    inputs += [helper.make_tensor_value_info(n, T.FLOAT, [width]) for n in names]
    graph = helper.make_graph(nodes, "big", inputs, [helper.make_tensor_value_info(current, T.FLOAT, [1, width])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, folder / "model.onnx")
    rng = np.random.default_rng(0)
    write_checkpoint(folder / "checkpoint", {n: rng.standard_normal(width, dtype=np.float32) for n in names})
    return [folder / "model.onnx", folder / "checkpoint"]


class Heartbeat:
    """Longest gap between 10 ms timer beats on the GUI thread."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.timer = QTimer(interval=BEAT_MS, timeout=self._beat)
        self.last = 0.0
        self.worst = 0.0
        self.beats = 0

    def start(self) -> None:
        self.last = time.perf_counter()
        self.worst, self.beats = 0.0, 0
        self.timer.start()

    def _beat(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self.last)
        self.last = now
        self.beats += 1

    def stop(self) -> float:
        self.timer.stop()
        return max(0.0, self.worst * 1000 - BEAT_MS)


def wait(app, predicate, timeout: float = 600) -> None:
    end = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > end:
            raise TimeoutError("benchmark step timed out")
        app.processEvents()
        time.sleep(0.001)


def wait_side_jobs(app, window) -> None:
    for _ in range(40):  # the plan timer fires 150 ms after a change
        app.processEvents()
        time.sleep(0.005)
    wait(app, lambda: not window.runner.side_jobs)


def main() -> int:
    from onnxport.gui.app import prepare_environment, tune_process

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    prepare_environment()  # WebEngine (the preview panel) needs --no-sandbox as root
    tune_process()  # the switch interval and GC freezing the app's main() sets: measure the app as run
    from PySide6.QtCore import QCoreApplication, QSettings, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
    import PySide6.QtWebEngineWidgets  # noqa: F401 - before the QApplication

    from onnxport.core.io.model_io import load_graph
    from onnxport.gui.dialogs.export_dialog import ExportChoices
    from onnxport.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(dir=OUT, prefix="gui-") as tmp:
        tmp = Path(tmp)
        wide = tmp / "wide.onnx"
        wide_model(wide)
        settings = QSettings(str(tmp / "settings.ini"), QSettings.IniFormat)
        window = MainWindow(settings=settings)
        window.show()
        app.processEvents()

        # 1 + 2a: open the 100k-tensor model in the real window, heartbeat running
        beat = Heartbeat()
        beat.start()
        done = []
        window.loaded.connect(lambda: done.append(time.perf_counter()))
        t0 = time.perf_counter()
        window.open_paths([wide])
        wait(app, lambda: done)
        open_s = time.perf_counter() - t0
        wait_side_jobs(app, window)
        open_stall = beat.stop()
        tree_s = window.last_tree_seconds
        results["tree"] = {"tensors": len(window.sources.index), "tree_seconds_gui_thread": round(tree_s, 3),
                           "open_seconds_total": round(open_s, 3), "nodes": len(load_graph(wide).graph.node)}
        results["stall_open_ms"] = round(open_stall, 1)
        print(f"tree: {len(window.sources.index)} tensors shown in {tree_s * 1000:.0f} ms on the GUI thread "
              f"(whole open, index and tree built in the worker: {open_s * 1000:.0f} ms)")
        print(f"longest GUI stall while opening it: {open_stall:.1f} ms")

        # 2b: export ~800 MB in the worker
        paths = big_export_model(tmp / "big")
        done.clear()
        window.open_paths(paths)
        wait(app, lambda: done)
        wait_side_jobs(app, window)  # the previous model's "export keeps" plan, if still running
        out = tmp / "out.onnx"
        ended = []
        window.jobEnded.connect(lambda name, how: ended.append((name, how)))
        beat.start()
        t2 = time.perf_counter()
        window.start_export(ExportChoices(out, validate=False))
        wait(app, lambda: ("export", "returned") in ended or ("export", "errored") in ended)
        export_s = time.perf_counter() - t2
        export_stall = beat.stop()
        size = out.stat().st_size if out.exists() else 0
        results["stall_export_ms"] = round(export_stall, 1)
        results["export"] = {"bytes": size, "seconds": round(export_s, 2), "beats": beat.beats,
                             "ended": ended[-1][1]}
        print(f"longest GUI stall while exporting {size / 1e6:.0f} MB in {export_s:.2f} s: {export_stall:.1f} ms "
              f"({beat.beats} beats)")
        window.close()
        settings.sync()  # written now, inside the temp folder; nothing left to write at exit
    # the bar is for export (the issue's); the open stall is reported alongside
    ok = (results["tree"]["tree_seconds_gui_thread"] < TREE_BAR_S and results["stall_export_ms"] <= STALL_BAR_MS and results["export"]["ended"] == "returned")
    results["bars"] = {"tree_seconds": TREE_BAR_S, "stall_ms": STALL_BAR_MS, "met": ok}
    (OUT / "gui_bench.json").write_text(json.dumps(results, indent=2))
    print_table(results)
    print(f"\nbars (tree < {TREE_BAR_S} s, GUI stall during export <= {STALL_BAR_MS} ms): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


def print_table(results: dict) -> None:
    """Measured vs bar, and each GUI-thread figure as a ratio of the worker's time in the same run."""
    tree_ms = 1000 * results["tree"]["tree_seconds_gui_thread"]
    open_ms = 1000 * results["tree"]["open_seconds_total"]
    export_ms = 1000 * results["export"]["seconds"]
    rows = [("tree shown (GUI thread), ms", tree_ms, 1000 * TREE_BAR_S, "whole open", open_ms),
            ("max GUI stall while opening, ms", results["stall_open_ms"], STALL_BAR_MS, "whole open", open_ms),
            ("max GUI stall while exporting, ms", results["stall_export_ms"], STALL_BAR_MS, "whole export",
             export_ms)]
    print(f"\n{'measure':36} {'value':>9} {'bar':>7} {'reference':>14} {'ref ms':>8} {'ratio':>7}")
    for name, value, bar, ref_name, ref in rows:
        ratio = value / ref if ref else float("nan")
        print(f"{name:36} {value:9.1f} {bar:7.0f} {ref_name:>14} {ref:8.0f} {ratio:7.3f}")


if __name__ == "__main__":
    sys.exit(main())
