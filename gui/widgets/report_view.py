"""A standalone view of an onnxport report (core/evaluate/report.py): is it right, and is it faster?

`ReportView(parent=None).set_report(report_dict)` shows a report as `build_report` makes it (None
clears it; `.report` is the dict shown): the verdict, the numbers (size, latency, speed-up,
per-output errors, nodes kept in float, notes) and a `ReportChart` (`.chart`): size and p50
latency before/after, and the error per output (1 - cosine) against the target. Any section may
be missing; the view shows what is there. `.verdict` and `.details` are its labels.
The nodes adding the most error are listed with check boxes (`checked_nodes()`); "Keep checked
nodes in float and quantize again" emits `requantizeRequested(list[str])` for the host window to
run `core.quantize.requantize`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPalette, QPen
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from onnxport.core.evaluate.compare import CLASSES
from onnxport.core.evaluate.sensitivity import MEASURABLE
from onnxport.core.util.text import human_size

from .accuracy_panel import AccuracyPanel
from .chart_labels import LABEL_PAD, fitted_label, short_label_width
from .layout_pass import one_layout_pass
from .plain_text import plain_label, plain_tip
from .provider_rows import provider_rows
from .wrapped_label import WrappedLabel

BEFORE = QColor("#8a98a8")
AFTER = QColor("#2f7fd1")
GOOD = QColor("#3a9a4a")
BAD = QColor("#c8423b")
TARGET = QColor("#d08a1a")
ERROR_TITLE = "Error (1 - cosine)"


class ReportChart(QWidget):
    """Three small bar groups drawn with QPainter: size, latency, error per output."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._chart: dict = {}
        self.setMinimumSize(280, 180)  # fits the Report tab of a 1000x600 window (labels elide)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_chart(self, chart: dict | None) -> None:
        self._chart = dict(chart or {})
        self.update()

    def panels(self) -> list[tuple[str, list[tuple[str, float | None, QColor]], float | None]]:
        """(title, [(label, value, color)], reference line) per panel, as drawn: only panels with
        something to compare (two sizes, two latencies; errors of two outputs or more), never one
        whose bars are all zero."""
        chart = self._chart
        result = []
        labels = chart.get("labels") or {}
        judged = not chart.get("measured_only")  # no accuracy target: the errors, neither good nor bad
        for key, title in (("size_bytes", "Size"), ("latency_ms", "Latency p50")):
            pair = chart.get(key)
            if pair:
                bars = [(labels.get("before") or "before", _scaled(pair.get("before")), BEFORE),
                        (labels.get("after") or "after", _scaled(pair.get("after")), AFTER)]
                result.append((title, bars, None))
        outputs = chart.get("outputs") or []
        if len(outputs) >= 2:  # one output: its error is a line of the text, not a chart
            target = chart.get("min_cosine") if judged else None
            bars = [(o["name"], None if o.get("cosine") is None else max(0.0, 1.0 - o["cosine"]),
                     AFTER if not judged else GOOD if o.get("passed") else BAD) for o in outputs]
            result.append((ERROR_TITLE, bars, None if target is None else 1.0 - target))
        return [p for p in result if any(v for _, v, _ in p[1])]

    def value_text(self, title: str, value: float | None) -> str:
        """A bar's figure as the report's text says it: sizes by human_size (B, KB, MB)."""
        if value is None:
            return "n/a"
        if title == "Size":
            return human_size(value)
        if title == "Latency p50":
            return f"{value:.3f} ms"
        return _short(value)

    def label_rects(self) -> list[list[tuple[str, QRectF]]]:
        """The x labels as drawn, per panel: (text, the rectangle its ink takes). A label wider
        than its bar's slot takes its short form ("dynamic" -> "int8", chart_labels.py), else is
        elided in the middle (both ends of a tensor name say something), so neighbours never
        overlap; the full name is the bar's tooltip (`tooltip_at`)."""
        metrics = QFontMetricsF(self._small_font())
        out = []
        for (_, bars, _x0, width, _, bottom, _), rects, _ in self._layout():
            slot = width / max(len(bars), 1)
            row = []
            for (label, _, _), rect in zip(bars, rects):
                text = fitted_label(label, metrics, slot - LABEL_PAD)
                w = metrics.horizontalAdvance(text)
                row.append((text, QRectF(rect.center().x() - w / 2, bottom + 2, w, metrics.height())))
            out.append(row)
        return out

    def tooltip_at(self, pos: QPointF) -> str:
        """The full label and figure of the bar whose column holds `pos` ("" between bars)."""
        for (title, bars, x0, width, top, _bottom, _), _, _ in self._layout():
            slot = width / max(len(bars), 1)
            if x0 <= pos.x() < x0 + width and top <= pos.y() <= self.height():
                label, value, _ = bars[min(int((pos.x() - x0) / slot), len(bars) - 1)]
                return f"{title}, {label}: {self.value_text(title, value)}"
        return ""

    def event(self, event: QEvent) -> bool:  # Qt override: the hovered bar's full label as its tooltip
        if event.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(QPointF(event.pos()))
            if text:
                QToolTip.showText(event.globalPos(), plain_tip(text), self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def _small_font(self) -> QFont:
        small = QFont(self.font())
        small.setPointSizeF(max(small.pointSizeF() * 0.85, 6.0))
        return small

    def bar_rects(self) -> list[list[QRectF]]:
        """The rectangles the bars are drawn in, per panel (for layout and tests)."""
        return [rects for _, rects, _ in self._layout()]

    def _layout(self):
        panels = self.panels()
        if not panels:
            return []
        margin, title_h, label_h = 8.0, 18.0, 16.0
        room = self.width() - margin * (len(panels) + 1)
        out = []
        x0 = margin
        for width, (title, bars, line) in zip(self._widths(panels, room), panels):
            top, bottom = margin + title_h, self.height() - margin - label_h * 2
            values = [v for _, v, _ in bars if v is not None] + ([line] if line is not None else [])
            vmax = max(values + [1e-12]) * 1.15
            slot = width / max(len(bars), 1)
            bar_w = min(slot * 0.6, 48.0)
            rects = []
            for k, (_, value, _) in enumerate(bars):
                h = 0.0 if value is None else max((bottom - top) * value / vmax, 2.0)  # a zero still shows
                cx = x0 + slot * (k + 0.5)
                rects.append(QRectF(cx - bar_w / 2, bottom - h, bar_w, h))
            line_y = None if line is None else bottom - (bottom - top) * line / vmax
            out.append(((title, bars, x0, width, top, bottom, line_y), rects, line))
            x0 += width + margin
        return out

    def _widths(self, panels, room: float) -> list[float]:
        """Room by bars (labels get a fair slot), but a panel at least its title's width, and the
        before/after panels room for their short labels ("int8"), when all fit."""
        metrics, small = QFontMetricsF(self.font()), QFontMetricsF(self._small_font())
        need = [max(metrics.horizontalAdvance(title) + 8.0,
                    0.0 if title == ERROR_TITLE else len(bars) * short_label_width([b[0] for b in bars], small))
                for title, bars, _ in panels]
        shares = [max(len(bars), 2) for _, bars, _ in panels]
        widths = [room * share / sum(shares) for share in shares]
        short = [i for i, w in enumerate(widths) if w < need[i]]
        rest = [i for i in range(len(panels)) if i not in short]
        if short and rest and sum(need) <= room:
            left = room - sum(need[i] for i in short)
            for i in short:
                widths[i] = need[i]
            for i in rest:
                widths[i] = left * shares[i] / sum(shares[j] for j in rest)
        return widths

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), self.palette().base())
        layout = self._layout()
        if not layout:
            painter.setPen(self.palette().text().color())
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no report yet")
            painter.end()
            return
        small = self._small_font()
        for ((title, bars, x0, width, top, bottom, line_y), rects, _), labels in zip(layout, self.label_rects()):
            painter.setPen(self.palette().text().color())
            shown = painter.fontMetrics().elidedText(title, Qt.TextElideMode.ElideRight, int(width))
            painter.drawText(QRectF(x0, 0, width, top), Qt.AlignmentFlag.AlignCenter, shown)
            painter.drawLine(int(x0), int(bottom), int(x0 + width), int(bottom))
            painter.setFont(small)
            for (_, value, color), rect, (label, ink) in zip(bars, rects, labels):
                painter.fillRect(rect, color)
                text = self.value_text(title, value)
                painter.drawText(QRectF(rect.center().x() - 40, rect.top() - 14, 80, 14),
                                 Qt.AlignmentFlag.AlignCenter, text)
                painter.drawText(ink.adjusted(-2, 0, 2, 0), Qt.AlignmentFlag.AlignCenter, label)
            if line_y is not None:
                painter.setPen(QPen(TARGET, 1.5, Qt.PenStyle.DashLine))
                painter.drawLine(int(x0), int(line_y), int(x0 + width), int(line_y))
            painter.setFont(self.font())
        painter.end()


def _scaled(value) -> float | None:
    return None if value is None else float(value)


def _short(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.2g}"


class ReportView(QWidget):
    requantizeRequested = Signal(list)  # node names to keep in float
    reportChanged = Signal(object)  # noqa: N815 - the report now shown (the preview's error overlay follows it)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: dict | None = None
        self.verdict = plain_label()
        font = self.verdict.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.verdict.setFont(font)
        self.details = WrappedLabel()
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.chart = ReportChart()
        self.nodes = QListWidget()  # at most ten rows, all shown: the tab scrolls as one page
        self.nodes.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.nodes.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.nodes.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a long node name; its tooltip has it whole
        self.nodes.setSizeAdjustPolicy(QListWidget.SizeAdjustPolicy.AdjustToContents)
        self.nodes.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.requantize_button = QPushButton("Keep checked nodes in float and quantize again")
        self.requantize_button.clicked.connect(self._emit_requantize)
        layout = QVBoxLayout(self)
        layout.addWidget(self.verdict)
        layout.addWidget(self.chart, 1)
        layout.addWidget(self.details)
        self.accuracy = AccuracyPanel()  # where the error jumps, before/after table (accuracy_panel.py)
        layout.addWidget(self.accuracy)
        self.nodes_label = QLabel("Nodes adding the most error:")
        layout.addWidget(self.nodes_label)
        layout.addWidget(self.nodes)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.requantize_button)
        layout.addLayout(row)
        self.set_report(None)

    def set_report(self, report: dict | None) -> None:
        """Show `report`; laid out once, in a later turn (layout_pass.py: each part shown or
        hidden would otherwise lay out the whole window again at once)."""
        with one_layout_pass(self):  # the accuracy panel's own set_report holds its layout
            self._show(report)
        self.reportChanged.emit(self.report)

    def _show(self, report: dict | None) -> None:
        self.report = report
        report = report or {}
        passed = report.get("passed")
        self.verdict.setText(_verdict_text(report))
        color = GOOD if passed else BAD if passed is False else self.palette().text().color()
        palette = self.verdict.palette()  # not a style sheet: parsing one and re-polishing costs ms
        palette.setColor(QPalette.ColorRole.WindowText, color)
        self.verdict.setPalette(palette)
        self.chart.set_chart({**(report.get("chart") or {}), "measured_only": _measured_only(report)})
        self.chart.setVisible(bool(self.chart.panels()))  # nothing to compare: no empty chart
        self.details.setText(_details_html(report))
        self._fill_nodes(report)
        self.accuracy.set_report(report)

    def _fill_nodes(self, report: dict) -> None:
        self.nodes.clear()
        validation = (report.get("quantize") or {}).get("validation") or report.get("validation") or {}
        layers = [e for e in validation.get("layers", []) if (e.get("added") or 0) >= MEASURABLE][:10]
        for e in layers:
            item = QListWidgetItem(f"{e['node']} ({e['op_type']}): +{e['added']:.4f} relative error")
            item.setData(Qt.ItemDataRole.UserRole, e["node"])
            item.setToolTip(plain_tip(item.text()))
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.nodes.addItem(item)
        has = bool(layers)
        self.nodes_label.setVisible(has)
        self.nodes.setVisible(has)
        self.requantize_button.setVisible(has and bool(report.get("quantize")))

    def checked_nodes(self) -> list[str]:
        return [self.nodes.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.nodes.count())
                if self.nodes.item(i).checkState() == Qt.CheckState.Checked]

    def _emit_requantize(self) -> None:
        names = self.checked_nodes()
        if names:
            self.requantizeRequested.emit(names)


def _details_html(report: dict) -> str:
    rows: list[str] = []
    q = report.get("quantize")
    if q:
        rows.append(f"<b>{q['mode']}</b>: {human_size(q['size_bytes'])}, {q['size_ratio']:.2f}x the float32 size")
        if q.get("kept_float_nodes"):
            rows.append("kept in float: " + ", ".join(_esc(n) for n in q["kept_float_nodes"]))
        rows += [f"<i>{_esc(n)}</i>" for n in q.get("notes", [])]
    b = report.get("bench")
    if b and b.get("verdict"):  # the paired ratio's verdict: faster, slower or no measurable difference
        size = "" if q else f", size x{b['size_ratio']:.3f}"  # said once: the quantized size is above
        phrase, _, rest = b["verdict"].partition(" (")
        rows.append(f"speed: <b>{_esc(phrase)}</b>" + (f" ({_esc(rest)}" if rest else "") + size)
    elif b and b.get("speedup"):
        size = "" if q else f", size x{b['size_ratio']:.3f}"
        pace = f"{b['speedup']:.2f}x</b> faster" if b["speedup"] >= 1 else f"{1 / b['speedup']:.2f}x</b> slower"
        rows.append(f"latency x{b['latency_ratio']:.3f} (<b>{pace}){size}")
    elif b and b.get("models"):
        m = b["models"][0]
        rows.append(f"p50 {m['p50_ms']:.3f} ms, {m['throughput']:.1f} samples/s")
    measured = _measured_only(report)
    for title, v in (("export", report.get("validation")), ("quantized", (q or {}).get("validation"))):
        if not v:
            continue
        how = " (measured, no accuracy target)" if title == "quantized" and measured else ""
        rows.append(f"{title} vs {_esc(v['reference_kind'])} <i>{_esc(Path(v['reference']).name)}</i>{how}:")
        for o in v["outputs"]:
            mark = "·" if title == "quantized" and measured else "✔" if o["passed"] else "✘"
            cos = "n/a" if o.get("cosine") is None else f"{o['cosine']:.6f}"
            mad = "n/a" if o.get("max_abs_diff") is None else f"{o['max_abs_diff']:.3g}"
            arg = "" if o.get("argmax_agreement") is None or o.get("kind") != CLASSES else f", argmax {100 * o['argmax_agreement']:.1f}%"
            rows.append(f"&nbsp;&nbsp;{mark} {_esc(o['name'])}: cosine {cos}, max abs diff {mad}{arg}")
    return "<br>".join(rows + provider_rows(report))


def _measured_only(report: dict) -> bool:
    """A quantized model measured with no accuracy target (`--no-target`): figures, no verdict."""
    q = report.get("quantize") or {}
    return bool(q.get("validation")) and q.get("target") is None


def _verdict_text(report: dict) -> str:
    passed = report.get("passed")
    if not report:
        return "No report"
    measured = " · quantized: measured, no target" if _measured_only(report) else ""
    if passed is None:
        return "Measured (no accuracy target)" if measured else "Measured (not validated)"
    return ("Validation passed" if passed else "Validation FAILED") + measured


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
