"""Screenshots of the compare view (issue 38): two models, and two checkpoints.

Called by scripts/screenshots.py with its window and helpers: the PP-OCR text-direction
classifier (shipped in the rapidocr package the tests use) against ONNX Runtime's own static QDQ
copy of it, graph B painted (Q/DQ nodes added, the first divergence centred) and graph A (the
activations the quantizer fused away); then the bundled example's checkpoint against a copy with
one parameter moved, as the table of parameters by change.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _classifier() -> Path | None:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    return path if path.is_file() else None


def _qdq_copy(src: Path, out: Path) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Lines(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.feeds = iter([{"x": rng.random((1, 3, 48, 192), dtype=np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(src), str(out), Lines(), quant_format=QuantFormat.QDQ)
    return out


def _changed_checkpoint(tmp: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT))  # tests/support writes ORT checkpoints
    from onnxport.core.workflow.sources import read_checkpoints
    from onnxport.resources import example_files
    from tests.support.checkpoint_writer import write_checkpoint

    ckpt = next(p for p in example_files() if p.name == "checkpoint")
    params = read_checkpoints([ckpt])
    arrays = {name: np.array(p.array()) for name, p in params.params.items()}
    name = sorted(arrays)[len(arrays) // 2]
    arrays[name] = arrays[name] + np.float32(0.05) * np.random.default_rng(1).standard_normal(arrays[name].shape,
                                                                                              dtype=np.float32)
    return ckpt, write_checkpoint(tmp / "checkpoint_moved", arrays)


# Set `window.__onnxportShown` once the page has rendered two frames running with the graph's scroll
# position unchanged: the paint is on screen and a centring scroll (Netron's `scrollTo`) has ended.
STILL_JS = """(function () {
  window.__onnxportShown = false;
  const target = document.getElementById('target') || document.scrollingElement;
  let last = '', still = 0;
  function frame() {
    const now = target ? target.scrollLeft + ',' + target.scrollTop : '';
    still = now === last ? still + 1 : 0;
    last = now;
    if (still >= 2) { window.__onnxportShown = true; } else { requestAnimationFrame(frame); }
  }
  requestAnimationFrame(frame);
})()"""
SHOWN_JS = "window.__onnxportShown === true"


def _settle(win, until) -> None:
    """Wait until the page has rendered what was painted, scrolled still (the event, not a time)."""
    win.view.run(STILL_JS)
    state = {"asked": False, "shown": False}

    def answered(ok) -> None:
        state["asked"], state["shown"] = False, bool(ok)

    def ask() -> bool:  # one question in flight at a time
        if not state["shown"] and not state["asked"]:
            state["asked"] = True
            win.view.run(SHOWN_JS, answered)
        return state["shown"]

    until(ask, timeout=60)


def compare_shots(window, tmp: Path, shot, until) -> None:
    from onnxport.gui.preview.compare_window import open_compare

    classifier = _classifier()
    if classifier is not None:
        qdq = _qdq_copy(classifier, tmp / "cls_qdq.onnx")
        win = open_compare(window, None, [classifier, qdq])
        win.move(window.x() + 60, window.y() + 30)
        win.resize(1300, 900)
        painted = []
        win.painted.connect(painted.append)
        until(lambda: painted, timeout=300)
        print(f"compare view: {painted[-1]} nodes painted on graph B")
        _settle(win, until)
        shot("12-compare-float-vs-qdq", win)
        row = next(r for r in range(win.table.rowCount()) if win.table.item(r, 0).text() == "removed")
        win.show_row(row)
        until(lambda: len(painted) > 1, timeout=60)
        _settle(win, until)
        shot("12b-compare-graph-a", win)
        win.close()
    else:
        print("compare shots: rapidocr's models are not installed (pip install --no-deps -r tests/real/models.txt)")
    a, b = _changed_checkpoint(tmp)
    win = open_compare(window, None, [a, b])
    win.move(window.x() + 120, window.y() + 80)
    win.resize(1100, 600)
    shown = []
    win.shown.connect(shown.append)
    until(lambda: shown, timeout=120)
    win.table.sortItems(5, order=__import__("PySide6.QtCore").QtCore.Qt.SortOrder.DescendingOrder)
    shot("13-compare-checkpoints", win)
    win.close()
