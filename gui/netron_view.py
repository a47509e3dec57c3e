"""The web view Netron runs in: its own private profile, loopback only, no consent banner.

- `LoopbackOnly` (a QWebEngineUrlRequestInterceptor) blocks every http(s)/ws(s) request whose
  host is not 127.0.0.1/localhost - Netron's page asks for an IP lookup and analytics - and keeps
  the blocked URLs in `blocked` (tests assert nothing left the machine).
- The profile is off the record (nothing written to disk) and gets Netron's `consent` cookie
  before the first load, so the cookie banner never covers the graph.
- `NetronView.run(js, callback)` runs JavaScript in the page; `node_count()` counts the graph
  nodes Netron drew; `focus(node_name)` selects and scrolls to a node.
- `release()` tears down in the order WebEngine needs: page first, then profile.
"""

from __future__ import annotations

import json
import time

import shiboken6
from PySide6.QtCore import QDateTime, QUrl
from PySide6.QtNetwork import QNetworkCookie
from PySide6.QtWebEngineCore import QWebEnginePage, QWebEngineProfile, QWebEngineUrlRequestInterceptor
from PySide6.QtWebEngineWidgets import QWebEngineView

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
NETWORK_SCHEMES = {"http", "https", "ws", "wss", "ftp"}
# operator nodes (not inputs/outputs), counted once Netron has laid the graph out (its view's
# target is set at the end of layout; nodes exist in the DOM before they are placed)
COUNT_NODES_JS = ("(window.__view__ && window.__view__._target) ? "
                  "document.querySelectorAll('#canvas g.graph-node').length : 0")
FOCUS_JS = """(function (id) {
  const view = window.__view__; const target = view && view._target;
  if (!target || !target._table) { return false; }
  for (const [value, element] of target._table) {
    if (element && element.id === id) { const selection = target.select([value]); target.scrollTo(selection); return true; }
  }
  return false;
})(%s)"""


class LoopbackOnly(QWebEngineUrlRequestInterceptor):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.blocked: list[str] = []
        self.allowed: list[str] = []

    def interceptRequest(self, info) -> None:  # noqa: N802 - Qt override
        url = info.requestUrl()
        if url.scheme() in NETWORK_SCHEMES and url.host() not in LOOPBACK:
            info.block(True)
            self.blocked.append(url.toString())
        else:
            self.allowed.append(url.toString())


def consent_cookie(origin: str) -> QNetworkCookie:
    cookie = QNetworkCookie(b"consent", str(int(time.time() * 1000)).encode())
    cookie.setDomain(QUrl(origin).host())
    cookie.setPath("/")
    cookie.setExpirationDate(QDateTime.currentDateTime().addDays(3650))
    return cookie


class NetronView(QWebEngineView):
    def __init__(self, origin: str, parent=None) -> None:
        super().__init__(parent)
        self.origin = origin
        self.profile: QWebEngineProfile | None = None
        self.interceptor = LoopbackOnly(self)

    def load(self, url: QUrl) -> None:  # noqa: D102 - the private profile is made on first use
        if self.profile is None:
            # The profile must outlive its page: a sibling created after this view is destroyed
            # after it (Qt deletes children in creation order); `release()` does it explicitly.
            self.profile = QWebEngineProfile(parent=self.parent())  # no storage name: off the record
            self.profile.setUrlRequestInterceptor(self.interceptor)
            self.profile.cookieStore().setCookie(consent_cookie(self.origin), QUrl(self.origin))
            self.setPage(QWebEnginePage(self.profile, self))
        super().load(url)

    def run(self, js: str, callback=None) -> None:
        if callback is None:
            self.page().runJavaScript(js)
        else:
            self.page().runJavaScript(js, 0, callback)

    def node_count(self, callback) -> None:
        self.run(COUNT_NODES_JS, lambda n: callback(int(n or 0)))

    def focus(self, node_name: str, callback=None) -> None:
        self.run(FOCUS_JS % json.dumps(f"node-name-{node_name}"), callback)

    def release(self) -> None:
        """Page before profile: a profile deleted while its page lives crashes WebEngine."""
        if self.profile is None:
            return
        page = self.page()
        self.stop()
        self.setPage(QWebEnginePage(self))  # a default-profile page owned by the view
        shiboken6.delete(page)  # now, not later: the event loop may not run again (app exit)
        shiboken6.delete(self.profile)
        self.profile = None
