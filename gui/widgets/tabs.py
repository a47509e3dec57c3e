"""The main window's right-hand tabs (besides "Preview", gui/preview/): "Overview" and "Report".

Each holds panels the window fills from core results; the window keeps no layout code.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from .panels import TextPanel, plan_html, sources_html, tensor_html
from .report_view import ReportView
from .weight_panel import WeightPanel

NOTHING_EXPORTED = "<i>Nothing exported yet.</i>"


class OverviewTab(QWidget):
    """What is loaded, what the export keeps, the tensor selected in the tree (a weight's numbers too)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sources_panel = TextPanel("Loaded", sources_html(None))
        self.plan_panel = TextPanel("Export keeps", plan_html(None))
        self.details_panel = TextPanel("Selected tensor", tensor_html(None))
        self.weight_panel = WeightPanel()  # a selected weight's numbers and histogram
        page = QWidget()  # scrolls as one page when a weight's numbers need more room than the tab has
        layout = QVBoxLayout(page)
        for panel in (self.sources_panel, self.plan_panel, self.details_panel, self.weight_panel):
            layout.addWidget(panel)
        layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(page)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.scroll = scroll
        bar = scroll.verticalScrollBar()
        self.weight_panel.shown.connect(self._reveal_weight)
        bar.rangeChanged.connect(lambda _low, _high: self.weight_panel.revealing() and self._reveal_weight())
        bar.actionTriggered.connect(lambda _action: self.weight_panel.stop_reveal())  # the user scrolls

    def show_tensor(self, info, runner, session) -> None:
        """The tensor selected in the tree (None: nothing), and a weight's numbers (`WeightPanel.follow`)."""
        self.details_panel.set_html(tensor_html(info))
        self.weight_panel.follow(runner, session, info)

    def _reveal_weight(self) -> None:
        """Scroll the Weight panel into view: whole if it fits, else from its top (its numbers and
        histogram first). Asked again as the page grows (`rangeChanged`): the scroll range follows
        the layout that gives the numbers their room, after the panel's own resize."""
        panel, bar = self.weight_panel, self.scroll.verticalScrollBar()
        top = panel.mapTo(self.scroll.widget(), QPoint(0, 0)).y()
        room = self.scroll.viewport().height()
        bar.setValue(top if panel.height() > room else min(max(bar.value(), top + panel.height() - room), top))

    def panels(self) -> tuple[TextPanel, TextPanel, TextPanel, WeightPanel]:
        """Loaded, Export keeps, Selected tensor, Weight."""
        return self.sources_panel, self.plan_panel, self.details_panel, self.weight_panel


class ReportTab(QScrollArea):
    """What the last export wrote, over the report of its validation/quantization.

    The tab scrolls as one page, like a document: a quantization's report (chart, numbers, the
    before/after table, the nodes list) is taller than the room a 1400x860 window leaves it. As a
    plain widget its minimum height grew past that room, and Qt grew the whole window (860 -> 925
    px, off a laptop's screen) and laid it all out and painted it again. In a scroll area a report's
    size stays inside the tab; the table and list show all their rows, so no scroll bar nests in
    another."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result_panel = TextPanel("Last export", NOTHING_EXPORTED)
        self.report_view = ReportView()
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(self.result_panel)
        layout.addWidget(self.report_view, 1)
        self.setWidget(page)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)

    def clear(self) -> None:
        """Forget the last export and its report (another model was opened: they were its)."""
        self.result_panel.set_html(NOTHING_EXPORTED)
        self.report_view.set_report(None)
