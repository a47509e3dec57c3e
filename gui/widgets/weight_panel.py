"""The "Weight" panel: a selected weight's numbers (core/params/tensor_stats.py) and its histogram.

`WeightPanel.show_stats(stats, page)` shows dtype, shape, min/max/mean/std, zeros and non-finite
counts (plain text: names come from the file), the histogram as bars (`Histogram`, painted from the
counts, the range under it) and a page of values; `show_pending(name)` says it is being read (the
window computes the statistics in a side job: a 2 GB weight is read in bounded chunks, never on
the GUI thread), `clear()` hides it. Text is laid out by `stats_lines` (testable without painting).
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QGroupBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from onnxport.core.graph.tensor_info import TensorKind
from onnxport.core.params.tensor_stats import TensorStats

from .plain_text import plain_label

BAR = QColor("#4a78b5")
PER_ROW = 4  # values per line of the page shown


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def stats_lines(stats: TensorStats, page: list) -> list[str]:
    """The panel's text: what the weight is, its numbers, its first values."""
    shape = " x ".join(str(d) for d in stats.shape) or "scalar"
    source = stats.source.split(" (")[0]  # "checkpoint", "initializer": the path is in Loaded
    lines = [f"{stats.name}: {stats.dtype} [{shape}]", f"{stats.count:,} values, from the {source}",
             f"min {_number(stats.min)}   max {_number(stats.max)}",
             f"mean {_number(stats.mean)}   std {_number(stats.std)}",
             f"zeros {stats.zeros:,}   NaN {stats.nan:,}   +inf {stats.posinf:,}   -inf {stats.neginf:,}"]
    lines.append(f"values [0:{len(page)}]:")
    for row in range(0, len(page), PER_ROW):
        lines.append("  " + "  ".join(_number(v) if isinstance(v, float) else str(v) for v in page[row:row + PER_ROW]))
    return lines


class Histogram(QWidget):
    """Bars of a histogram's counts, scaled to the tallest."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.counts: list[int] = []
        self.setMinimumHeight(90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(320, 90)

    def set_counts(self, counts: list[int]) -> None:
        self.counts = list(counts)
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        if not self.counts:
            return
        painter = QPainter(self)
        top = max(self.counts) or 1
        width = self.width() / len(self.counts)
        for i, count in enumerate(self.counts):
            height = (self.height() - 2) * count / top
            painter.fillRect(QRectF(i * width, self.height() - height, max(width - 1, 1), height), BAR)
        painter.end()


class WeightPanel(QGroupBox):
    """See the module docstring."""

    shown = Signal()  # its numbers are shown: the tab scrolls them into view

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Weight", parent)
        self.text = plain_label()  # short lines, never wrapped: their height is exact in any layout
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.histogram = Histogram(self)
        self.range = QLabel()
        self.stats: TensorStats | None = None
        self.values = plain_label()
        self.values.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        for widget in (self.text, self.histogram, self.range, self.values):
            layout.addWidget(widget)
        self.clear()

    def clear(self) -> None:
        self.stats = None
        self.hide()

    def show_pending(self, name: str) -> None:
        self.stats = None
        self.values.setText("")
        self.text.setText(f"reading {name}…")
        self.histogram.set_counts([])
        self.range.setText("")
        self.show()

    def show_stats(self, stats: TensorStats, page: list) -> None:
        self.stats = stats
        lines = stats_lines(stats, page)
        self.text.setText("\n".join(lines[:5]))
        self.values.setText("\n".join(lines[5:]))
        self.histogram.set_counts(stats.histogram)
        self.range.setText(f"{len(stats.histogram)} bins from {_number(stats.edges[0])} to {_number(stats.edges[-1])}"
                           if stats.edges else "no finite values")
        self.show()
        self.shown.emit()

    def follow(self, runner, session, info) -> None:
        """The tensor selected (`info`) is a weight: read its numbers in a side job of `runner`
        (newest answer only), else hide."""
        if session is None or info is None or info.kind != TensorKind.PARAMETER:
            runner.drop("weight")
            self.clear()
            return
        self.show_pending(info.name)
        runner.side("weight", lambda progress, cancel: weight_numbers(session, info.name, cancel),
                    lambda found: self.show_stats(*found),
                    lambda exc: self.show_error(exc.one_line() if hasattr(exc, "one_line") else str(exc)))

    def show_error(self, text: str) -> None:
        self.stats = None
        self.values.setText("")
        self.text.setText(text)
        self.histogram.set_counts([])
        self.range.setText("")
        self.show()


PAGE = 32  # values shown


def weight_numbers(session, name: str, cancel) -> tuple[TensorStats, list]:
    """The side job's work: the weight's statistics and its first values (chunked reads)."""
    from onnxport.core.params.tensor_stats import tensor_page, tensor_stats

    values = session.tensor_values(name)
    return tensor_stats(values, cancel=cancel), tensor_page(values, 0, PAGE).tolist()
