"""The main window's right-hand tabs (besides "Preview", gui/preview/): "Overview" and "Report".

Each holds panels the window fills from core results; the window keeps no layout code.
"""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from .panels import TextPanel, plan_html, sources_html, tensor_html
from .report_view import ReportView


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


class ReportTab(QWidget):
    """What the last export wrote, over the report of its validation/quantization."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result_panel = TextPanel("Last export", "<i>Nothing exported yet.</i>")
        self.report_view = ReportView()
        layout = QVBoxLayout(self)
        layout.addWidget(self.result_panel)
        layout.addWidget(self.report_view, 1)
