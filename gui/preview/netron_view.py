"""The web view Netron runs in: its own private profile, loopback only, no consent banner.

- `LoopbackOnly` (a QWebEngineUrlRequestInterceptor) blocks every request that names a host off
  this machine (anything but localhost, 127/8, ::1) - Netron's page asks for an IP lookup and
  analytics - and logs every request it saw, let through or blocked, in `log` (`RequestSeen`
  records; `blocked`/`allowed` list the URLs): tests prove from it that nothing left the machine.
- The profile is off the record (nothing written to disk), prefetches no DNS, sends no hyperlink
  pings, and gets Netron's `consent` cookie before the first load, so the cookie banner never
  covers the graph. (Chromium-wide switches against background traffic: gui/app.py.)
- `run(js, callback)` runs JavaScript in the page; `node_count()` counts the nodes Netron drew;
  `ready()`: Netron runs in the page; `reopen()` opens the next model in place; `focus(node)`
  selects a node; a right click on a node says which (`nodeMenu`: the window offers "Start here").
- `release()` tears down in the order WebEngine needs: view and page first, then profile.
"""

from __future__ import annotations

import collections
import ipaddress
import json
import threading
import time
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QDateTime, QPoint, QUrl, Signal
from PySide6.QtNetwork import QNetworkCookie
from PySide6.QtWebEngineCore import (
    QWebEnginePage,
    QWebEngineProfile,
    QWebEngineSettings,
    QWebEngineUrlRequestInterceptor,
)
from PySide6.QtWebEngineWidgets import QWebEngineView

LOOPBACK_NAMES = {"localhost"}  # Chromium answers it itself (loopback), never asks DNS
# schemes that never reach the network whatever host they name; any other scheme with a host is
# judged by that host (an unknown scheme naming a remote host is blocked, not trusted)
LOCAL_SCHEMES = {"data", "blob", "about", "qrc", "file", "chrome", "devtools", "chrome-error"}
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
# Netron runs in the page and can open a model in place (`reopen`): its view and host exist
READY_JS = ("!!(window.__view__ && window.__view__._host && "
            "typeof window.__view__._host._openModel === 'function')")
FOCUS_JS = """(function (id) {
  const view = window.__view__; const target = view && view._target;
  if (!target || !target._table) { return false; }
  for (const [value, element] of target._table) {
    if (element && element.id === id) { const selection = target.select([value]); target.scrollTo(selection); return true; }
  }
  return false;
})(%s)"""


def is_loopback_host(host: str) -> bool:
    """localhost, 127.0.0.0/8, ::1 (and ::ffff:127.x.x.x); QUrl gives IPv6 hosts without brackets."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # a name other than localhost: it would need DNS, i.e. the network
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


@dataclass(frozen=True)
class RequestSeen:
    """One request the interceptor saw, and what it decided."""
    url: str
    method: str
    resource_type: str  # e.g. "ResourceTypeXhr", "ResourceTypeScript", "ResourceTypeMainFrame"
    first_party: str  # the page the request came from
    blocked: bool
    at: float  # time.time() when seen


class LoopbackOnly(QWebEngineUrlRequestInterceptor):
    """Lets a request through only if it cannot leave the machine; logs every one in `log` (the
    last LOG_LIMIT: a long session of previews does not grow it without end)."""

    LOG_LIMIT = 10_000

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.log: collections.deque[RequestSeen] = collections.deque(maxlen=self.LOG_LIMIT)
        self._lock = threading.Lock()  # requests may be intercepted off the GUI thread

    @staticmethod
    def allows(url: QUrl) -> bool:
        host = url.host()
        return url.scheme() in LOCAL_SCHEMES or not host or is_loopback_host(host)

    def interceptRequest(self, info) -> None:  # noqa: N802 - Qt override
        url = info.requestUrl()
        blocked = not self.allows(url)
        if blocked:
            info.block(True)
        seen = RequestSeen(url.toString(), bytes(info.requestMethod()).decode("latin-1"),
                           info.resourceType().name, info.firstPartyUrl().toString(), blocked, time.time())
        with self._lock:
            self.log.append(seen)

    def entries(self) -> list[RequestSeen]:
        """A copy of the log, safe to read while requests keep coming."""
        with self._lock:
            return list(self.log)

    @property
    def blocked(self) -> list[str]:
        return [r.url for r in self.entries() if r.blocked]

    @property
    def allowed(self) -> list[str]:
        return [r.url for r in self.entries() if not r.blocked]


def consent_cookie(origin: str) -> QNetworkCookie:
    cookie = QNetworkCookie(b"consent", str(int(time.time() * 1000)).encode())
    cookie.setDomain(QUrl(origin).host())
    cookie.setPath("/")
    cookie.setExpirationDate(QDateTime.currentDateTime().addDays(3650))
    return cookie


# the name of the drawn node at a point of the page (CSS pixels), '' for none
NODE_AT_JS = """(function (x, y) {
  const at = document.elementFromPoint(x, y); const g = at && at.closest('g.graph-node');
  return g && g.id && g.id.startsWith('node-name-') ? g.id.substring('node-name-'.length) : '';
})(%d, %d)"""


class NetronView(QWebEngineView):
    nodeMenu = Signal(str, QPoint)  # noqa: N815 - a drawn node right-clicked, and where (global)

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
            settings = self.profile.settings()  # off by default; said here so it stays so
            for attribute in (QWebEngineSettings.DnsPrefetchEnabled, QWebEngineSettings.HyperlinkAuditingEnabled):
                settings.setAttribute(attribute, False)
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

    def ready(self, callback) -> None:
        """`callback(True)` once Netron runs in the page (it can `reopen`), else `callback(False)`."""
        self.run(READY_JS, lambda ok: callback(bool(ok)))

    def reopen(self, data_url: str, name: str, marker: int, callback) -> None:
        """Open `data_url` in the running Netron page; `callback(False)` if there is none."""
        self.run(REOPEN_JS % (json.dumps(data_url), json.dumps(name), marker), lambda ok: callback(bool(ok)))

    def contextMenuEvent(self, event) -> None:  # noqa: N802 - Qt override
        """A right click asks the page which node is there; `nodeMenu` says it (no browser menu)."""
        self.node_menu_at(event.pos(), event.globalPos())
        event.accept()

    def node_menu_at(self, pos: QPoint, global_pos: QPoint) -> None:
        zoom = self.zoomFactor() or 1.0
        self.run(NODE_AT_JS % (int(pos.x() / zoom), int(pos.y() / zoom)),
                 lambda name: name and self.nodeMenu.emit(str(name), global_pos))

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
