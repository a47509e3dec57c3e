"""The main window's right-hand tabs (besides "Preview", gui/preview/): "Overview" and "Report".

Each holds panels the window fills from core results; the window keeps no layout code.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from .panels import TextPanel, plan_html, sources_html, tensor_html
from .report_view import ReportView

NOTHING_EXPORTED = "<i>Nothing exported yet.</i>"


class OverviewTab(QWidget):
    """What is loaded, what the export keeps, the tensor selected in the tree."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sources_panel = TextPanel("Loaded", sources_html(None))
        self.plan_panel = TextPanel("Export keeps", plan_html(None))
        self.details_panel = TextPanel("Selected tensor", tensor_html(None))
        layout = QVBoxLayout(self)
        for panel in (self.sources_panel, self.plan_panel, self.details_panel):
            layout.addWidget(panel)
        layout.addStretch(1)


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
