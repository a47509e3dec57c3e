""""Open in browser" with no browser to open it says so and gives the address (issue 35: it said
nothing); with one, the preview's address reaches it and nothing is said."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QApplication, QMessageBox

from .test_netron_preview import eval_model, panel, show  # noqa: F401 - fixtures

pytestmark = pytest.mark.gui


class Browser(QObject):
    """A handler of http addresses, registered with Qt as a browser would be."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url.toString())


def info_boxes() -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]


def test_open_in_browser_says_where_the_preview_is_when_no_browser_opens_it(qtbot, panel, eval_model):  # noqa: F811
    show(qtbot, panel, eval_model, ["logits"])
    browser = Browser()
    QDesktopServices.setUrlHandler("http", browser, "open")
    try:
        assert panel.open_in_browser() is True
    finally:
        QDesktopServices.unsetUrlHandler("http")
    assert browser.urls == [panel.last_url] and not info_boxes()

    panel.open_url = lambda url: False  # a system where no program takes web addresses
    assert panel.open_in_browser() is False
    boxes = info_boxes()
    assert len(boxes) == 1 and panel.last_url in boxes[0].text() and "No program on this system" in boxes[0].text()
    assert QGuiApplication.clipboard().text() == panel.last_url
    boxes[0].close()


def test_open_in_browser_before_any_preview_says_why_nothing_opens(qtbot, panel):  # noqa: F811
    panel.open_url = lambda url: pytest.fail("nothing to open")
    assert panel.open_in_browser() is False and "check an output" in panel.status.text()
