"""The "Weight" panel: a selected weight's numbers (core/params/tensor_stats.py) and its histogram.

`WeightPanel.show_stats(stats, page)` shows dtype, shape, min/max/mean/std, zeros and non-finite
counts (plain text: names come from the file), the histogram as bars (`Histogram`, painted from the
counts, the range under it) and a page of values; `show_pending(name)` says it is being read (the
window computes the statistics in a side job: a 2 GB weight is read in bounded chunks, never on
the GUI thread), `clear()` hides it. Every label wraps at the panel's width (the Details dock is
narrow by default: an unwrapped line widened the whole Overview page past it, cut at the right);
the values flow as one paragraph. Text is laid out by `stats_lines` (testable without painting).
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QGroupBox, QSizePolicy, QVBoxLayout, QWidget

from onnxport.core.graph.tensor_info import TensorKind
from onnxport.core.params.tensor_stats import TensorStats

from .plain_text import make_plain
from .wrapped_label import WrappedLabel

BAR = QColor("#4a78b5")
VALUE_GAP = "   "  # between two values of the page (the paragraph wraps at a gap, never inside a value)


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
    lines.append(VALUE_GAP.join(_number(v) if isinstance(v, float) else str(v) for v in page))
    return lines


def _wrapped(selectable: bool = True) -> WrappedLabel:
    label = WrappedLabel()
    make_plain(label)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class Histogram(QWidget):
    """Bars of a histogram's counts, scaled to the tallest."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.counts: list[int] = []
        self.setMinimumHeight(90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(200, 90)  # as narrow as the dock: the bars share the width they get

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

    shown = Signal()  # its numbers are shown: the tab scrolls them into view (again once laid out)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Weight", parent)
        self.text = _wrapped()
        self.histogram = Histogram(self)
        self.range = _wrapped(selectable=False)
        self.stats: TensorStats | None = None
        self.values = _wrapped()
        layout = QVBoxLayout(self)
        for widget in (self.text, self.histogram, self.range, self.values):
            layout.addWidget(widget)
        self.clear()

    def clear(self) -> None:
        self.stats = None
        self._reveal = False
        self.hide()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        """Numbers shown take a few layout passes to get their room (wrapped lines): `shown` again at
        each, so the tab scrolls to where the panel is now (scrolled once, the histogram stayed below
        the fold), until the user scrolls himself (`stop_reveal`) or another tensor is selected."""
        super().resizeEvent(event)
        if self._reveal:
            self.shown.emit()

    def stop_reveal(self) -> None:
        self._reveal = False

    def revealing(self) -> bool:
        """Numbers shown and the user has not scrolled since: the tab keeps them in view."""
        return self._reveal and self.isVisible()

    def show_pending(self, name: str) -> None:
        self.stats = None
        self._reveal = False
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
        self.range.setText(f"{len(stats.histogram)} bins, {_number(stats.edges[0])} to {_number(stats.edges[-1])}"
                           if stats.edges else "no finite values")
        self.show()
        self._reveal = True
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
