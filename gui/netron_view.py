"""The web view Netron runs in: its own private profile, loopback only, no consent banner.

- `LoopbackOnly` (a QWebEngineUrlRequestInterceptor) blocks every http(s)/ws(s) request whose
  host is not 127.0.0.1/localhost - Netron's page asks for an IP lookup and analytics - and keeps
  the blocked URLs in `blocked` (tests assert nothing left the machine).
- The profile is off the record (nothing written to disk) and gets Netron's `consent` cookie
  before the first load, so the cookie banner never covers the graph.
- `NetronView.run(js, callback)` runs JavaScript in the page; `node_count()` counts the graph
  nodes Netron drew; `reopen()` opens the next model in the same page (no reload); `focus(node_name)` selects and scrolls to a node.
- `release()` tears down in the order WebEngine needs: view and page first, then profile.
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
# target is set at the end of layout; nodes exist in the DOM before they are placed). After an
# in-page reopen (`reopen`), only once that model's open has finished (its marker is set).
COUNT_NODES_JS = ("window.__onnxport_drawn === -1 ? -1 : ((%s === null || window.__onnxport_drawn === %s) && window.__view__ && window.__view__._target)"
                  " ? document.querySelectorAll('#canvas g.graph-node').length : 0")
# open another model in the page already running Netron: no reload, no script re-parse
REOPEN_JS = """(function (url, name, marker) {
  const view = window.__view__; const host = view && view._host;
  if (!host || typeof host._openModel !== 'function') { return false; }
  window.__onnxport_drawn = null;
  host._openModel(url, name, name).then((status) => { window.__onnxport_drawn = status === '' ? marker : -1; });
  return true;
})(%s, %s, %d)"""
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

    def node_count(self, callback, marker: int | None = None) -> None:
        """Nodes drawn (0 while not drawn yet, -1 if a reopen failed); `marker`: the one given to
        `reopen`, if used."""
        key = "null" if marker is None else str(int(marker))
        self.run(COUNT_NODES_JS % (key, key), lambda n: callback(int(n or 0)))

    def reopen(self, data_url: str, name: str, marker: int, callback) -> None:
        """Open `data_url` in the running Netron page; `callback(False)` if there is none."""
        self.run(REOPEN_JS % (json.dumps(data_url), json.dumps(name), marker), lambda ok: callback(bool(ok)))

    def focus(self, node_name: str, callback=None) -> None:
        self.run(FOCUS_JS % json.dumps(f"node-name-{node_name}"), callback)

    def release(self) -> None:
        """Delete this view, then its profile: the view takes its page (a child) with it, and a
        profile deleted while one of its pages lives crashes WebEngine. No page of the default
        profile is left behind either (it would outlive the app's default profile at exit).
        The view must not be used afterwards."""
        profile, self.profile = self.profile, None
        self.stop()
        if profile is not None:
            profile.setUrlRequestInterceptor(None)
        shiboken6.delete(self)  # now, not later: the event loop may not run again (app exit)
        if profile is not None:
            shiboken6.delete(profile)
