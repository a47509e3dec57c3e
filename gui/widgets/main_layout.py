"""The main window's layout: the graph gets the room, the panels sit around it.

- centre: the Preview (Netron, gui/preview/), the thing people come to look at;
- left dock "Outputs": the outputs tree with its filter (outputs_pane.py);
- right dock "Details": tabs "Overview" (loaded, export keeps, selected tensor) and "Report";
- the log dock below "Details", on the right.
Every dock can be resized, moved or closed (the View menu brings it back); their sizes and places
are saved with the window state (app_state.py), so the layout the user made is the one they find.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMainWindow, QStyle, QTabWidget, QWidget

OUTPUTS_WIDTH = 290  # at 1400x860 the graph keeps more than half of the window
DETAILS_WIDTH = 270
LOG_HEIGHT = 170


def dock(window: QMainWindow, title: str, name: str, widget: QWidget) -> QDockWidget:
    panel = QDockWidget(title, window)
    panel.setObjectName(name)  # the window state finds it by this name
    panel.setWidget(widget)
    return panel


def lay_out(window: QMainWindow, outputs: QWidget, overview: QWidget, report: QWidget, preview: QWidget,
            log_dock: QDockWidget) -> tuple[QTabWidget, QDockWidget, QDockWidget]:
    """Place the panels (see the module docstring); returns (details tabs, outputs dock, details dock)."""
    tabs = QTabWidget()
    tabs.setObjectName("detailsTabs")
    tabs.addTab(overview, "Overview")
    tabs.addTab(report, "Report")
    window.setCentralWidget(preview)
    outputs_dock = dock(window, "Outputs", "outputsDock", outputs)
    details_dock = dock(window, "Details", "detailsDock", tabs)
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, outputs_dock)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, details_dock)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, log_dock)
    window.splitDockWidget(details_dock, log_dock, Qt.Orientation.Vertical)
    window.resizeDocks([outputs_dock, details_dock], [OUTPUTS_WIDTH, DETAILS_WIDTH], Qt.Orientation.Horizontal)
    window.resizeDocks([log_dock], [LOG_HEIGHT], Qt.Orientation.Vertical)
    return tabs, outputs_dock, details_dock


def fit_width(window: QMainWindow, panel: QDockWidget, page: QWidget, cap: float = 0.45) -> None:
    """Widen `panel` (never narrow it) so that `page`, the content of a scroll area in it, fits
    without a horizontal scroll bar (at most `cap` of the window): a report wider than the panel."""
    needed = page.minimumSizeHint().width() + panel.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent) + 24
    wanted = min(needed, int(cap * window.width()))
    if panel.isVisible() and panel.width() < wanted:
        window.resizeDocks([panel], [wanted], Qt.Orientation.Horizontal)


def add_view_menu(window: QMainWindow, docks: list[QDockWidget]) -> list[QAction]:
    """View menu: show or hide each panel (Ctrl+1, Ctrl+2, ...)."""
    menu = window.menuBar().addMenu("&View")
    actions = []
    for number, panel in enumerate(docks, start=1):
        act = panel.toggleViewAction()
        act.setShortcut(f"Ctrl+{number}")
        act.setStatusTip(f"Show or hide the {panel.windowTitle()} panel")
        menu.addAction(act)
        actions.append(act)
    return actions
