"""The status bar's progress of export + validate + quantize is monotonic and names its step
(issue 15, cut 8: it waited at "validating the export 50%", and said done before benchmarking)."""

from __future__ import annotations

from onnxport.gui.dialogs.export_dialog import ExportChoices
from onnxport.gui.widgets.job_status import STEPS
from tests.core.cli.test_cli_progress import check_reports
from tests.core.model_builders import decisive_mlp_weights, eval_like_mlp
from tests.core.quant_models import save
from tests.support.checkpoint_writer import write_checkpoint

from ..test_main_window import open_example


def test_status_bar_progress_of_a_real_export_validate_quantize(qtbot, window, tmp_path):
    model = save(eval_like_mlp(d_hidden=256), tmp_path / "eval_model.onnx")  # big enough for int8 to gain
    write_checkpoint(tmp_path / "checkpoint", decisive_mlp_weights(seed=5, d_hidden=256))  # meets the target on any CPU
    open_example(qtbot, window, [model, tmp_path / "checkpoint"])
    shown: list[tuple[float, str]] = []

    def record(fraction, message):  # what the status bar shows, right after it shows it
        bar = window.job_status.progress
        assert bar.maximum() == STEPS, f"busy indicator at {message!r}"  # never loses its place
        shown.append((bar.value() / STEPS, window.job_status.text.text()))

    window.runner.progress.connect(record)
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, quantize="dynamic", validate=True))
    assert (out.parent / "m.int8.onnx").is_file()
    check_reports(shown, ["exporting", "validating", "quantizing", "benchmarking", "writing the report"],
                  optional=("writing the report",))
    qtbot.waitUntil(lambda: window.job_status.text.text() == "ready", timeout=300_000)


class Paints:
    """Counts a widget's paint events (an event filter)."""

    def __init__(self, widget) -> None:
        from PySide6.QtCore import QEvent, QObject

        class Filter(QObject):
            def eventFilter(inner, watched, event):  # noqa: N802, N805 - Qt's API
                if event.type() == QEvent.Type.Paint:
                    self.count += 1
                return False

        self.count, self.widget, self.filter = 0, widget, Filter()
        widget.installEventFilter(self.filter)

    def remove(self) -> None:
        self.widget.removeEventFilter(self.filter)


def flush_paints(qtbot, sentinel: Paints) -> None:
    """Every repaint asked for so far in the sentinel's window has happened: Qt paints a window's
    pending updates together, so once the sentinel's own update is painted, none asked before it
    is still due. An event to wait for, instead of waiting for time to pass."""
    before = sentinel.count
    sentinel.widget.update()
    qtbot.waitUntil(lambda: sentinel.count > before, timeout=300_000)


def test_a_progress_step_is_painted_with_the_next_frame_not_inside_the_signal(qtbot, window):
    """QProgressBar.setValue repaints at once; the status bar defers it to the event loop."""
    bar = window.job_status.progress
    qtbot.waitUntil(bar.isVisible, timeout=300_000)
    counter, sentinel = Paints(bar), Paints(window.job_status.text)
    window.job_status.busy("exporting")
    flush_paints(qtbot, sentinel)
    before = counter.count
    window.job_status.show_progress(0.5, "exporting: writing parameters")
    assert counter.count == before, "painted inside the progress call"
    assert bar.value() == STEPS // 2 and window.job_status.text.text() == "exporting: writing parameters"
    qtbot.waitUntil(lambda: counter.count > before, timeout=300_000)  # ...and with the next frame
    flush_paints(qtbot, sentinel)
    painted = counter.count
    for fraction in (0.501, 0.503, 0.505):  # the same percent, the same message: nothing to show
        window.job_status.show_progress(fraction, "exporting: writing parameters")
    flush_paints(qtbot, sentinel)
    assert counter.count == painted, "repainted a bar that did not change"
    window.job_status.show_progress(0.51, "exporting: writing parameters")
    qtbot.waitUntil(lambda: counter.count > painted, timeout=300_000)  # a new percent is painted
    painted = counter.count
    window.job_status.idle()
    assert counter.count == painted and bar.value() == 0
    counter.remove()
    sentinel.remove()
