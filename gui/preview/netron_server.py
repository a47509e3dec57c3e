"""A loopback-only HTTP server for Netron's page and the current preview model.

Not `netron.serve`: its `/data/` route serves any file in the model's folder, and its page locks
itself ("Please update...") 180 days after its build date. Here:
- it binds 127.0.0.1 with an OS-chosen port, and answers only paths under an unguessable token
  (`/<token>/...`, the page's URL carries it: no other local process can read the graph) with a
  `Host` of 127.0.0.1:port or localhost:port (a web page cannot read it through DNS rebinding);
  anything else is a 400 or 404, never a traceback; it remembers only the last requests' paths;
- connections are bounded (none needs the token): MAX_CONNECTIONS at once, READ_TIMEOUT_S per
  read, and one open over CONNECTION_DEADLINE_S is cut while others wait: none pins a thread;
- `data/<name>` serves the preview bytes published last (from memory); Netron's static files come
  from the installed `netron` package, read-only, by extension;
- `index.html` gets the serving day as build date, the model, SIDEBAR_CSS; `browser.js`'s age
  check is off, so the page never ages out whatever the clock says.
"""

from __future__ import annotations

import collections
import datetime
import hmac
import html as html_text
import http.server
import re
import secrets
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import netron

NETRON_DIR = Path(netron.__file__).resolve().parent
MIME = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png",
        ".ico": "image/x-icon", ".json": "application/json", ".svg": "image/svg+xml",
        ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf"}
AGE_CHECK = "if (days > 180) {"
MAX_CONNECTIONS = 16  # served at once (Chromium opens at most 6 per host); the next ones wait
READ_TIMEOUT_S = 5.0  # per read of a request: an idle connection ends then
CONNECTION_DEADLINE_S = 20.0  # what a connection may take when others wait for its place
REMEMBERED = 256  # request paths kept in `requests` (tests, debugging) ...
PATH_KEPT = 200  # ... each cut to this many characters
# Netron's node sidebar keeps each value on one line (`white-space: pre`) in a box as wide as the
# sidebar: a long tensor name (`/encoder/layer.0/attention/Softmax_output_0`) is cut off. Wrap
# names anywhere instead; tensor values (`pre`) keep their layout.
SIDEBAR_CSS = ("<style id=\"onnxport-sidebar\">.sidebar-item-value-line, .sidebar-item-value-line-content, "
               ".sidebar-item-value-line-link, .sidebar-item-value-line-break { white-space: pre-wrap; "
               "overflow-wrap: anywhere; word-break: break-all; overflow-x: hidden; }</style>")


def patched_index(html: str, file_url: str | None, name: str, today: datetime.datetime) -> str:
    """Netron's index.html with a fresh build date, the model to open (None: none, Netron starts
    on its empty page, ready to open one) and SIDEBAR_CSS."""
    stamp = today.strftime("%Y-%m-%d %H:%M:%S")
    html = re.sub(r'<meta name="date" content="[^"]*">', f'<meta name="date" content="{stamp}">', html)
    meta = '<meta name="type" content="Python">'
    if file_url is not None:
        file_url, name = html_text.escape(file_url), html_text.escape(name)
        meta += (f'\n<meta name="file" content="{file_url}">\n'
                 f'<meta name="name" content="{name}">\n<meta name="identifier" content="{name}">')
    html = re.sub(r'(<meta name="version" content="[^"]*">)', lambda m: m.group(1) + "\n" + meta, html, count=1)
    return html.replace("</head>", SIDEBAR_CSS + "\n</head>", 1)


def _static_file(path: str) -> tuple[bytes | None, str]:
    """One of Netron's own files (a name in its folder with a known extension), and its type."""
    try:
        file = (NETRON_DIR / path.lstrip("/")).resolve()
        if file.parent != NETRON_DIR or file.suffix not in MIME or not file.is_file():
            return None, "text/plain"
        body = file.read_bytes()
    except (OSError, ValueError):  # a name too long for the file system...
        return None, "text/plain"
    if file.name == "browser.js":
        body = patched_browser_js(body.decode("utf-8")).encode("utf-8")
    return body, MIME[file.suffix]


def patched_browser_js(js: str) -> str:
    """Netron's browser.js without its build-age lock-out (a no-op if the check is not found)."""
    return js.replace(AGE_CHECK, "if (false && days > 180) {")


class _BoundedServer(http.server.ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at once (see the module docstring).

    socketserver prints a traceback to stderr for any error in a handler (a client that hangs up
    mid-request): the client had its answer or left; the app's console stays clean."""

    errors = 0
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the listen backlog: connections waiting for a place wait in the kernel

    def __init__(self, address, handler, limit: int, deadline_s: float) -> None:
        super().__init__(address, handler)
        self.limit, self.deadline_s = limit, deadline_s
        self.open: dict[socket.socket, float] = {}  # connections served now -> when they came
        self.most = 0  # the most served at once (tests)
        self.stopping = False
        self._changed = threading.Condition()

    def handle_error(self, request, client_address) -> None:
        self.errors += 1

    def process_request(self, request, client_address) -> None:
        with self._changed:
            while len(self.open) >= self.limit and not self.stopping:
                self._cut_overdue()
                self._changed.wait(timeout=self.deadline_s / 4)
            if self.stopping:
                self.shutdown_request(request)
                return
            self.open[request] = time.monotonic()
            self.most = max(self.most, len(self.open))
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._changed:
                self.open.pop(request, None)
                self._changed.notify_all()

    def stop_waiting(self) -> None:
        with self._changed:
            self.stopping = True
            self._changed.notify_all()

    def _cut_overdue(self) -> None:
        now = time.monotonic()
        for conn, since in list(self.open.items()):
            if now - since > self.deadline_s:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # its handler's read returns; its thread ends
                except OSError:
                    pass


class PreviewServer:
    """Serves Netron and one model; `url` opens the model published last."""

    def __init__(self, build_date: datetime.datetime | None = None, read_timeout_s: float = READ_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, deadline_s: float = CONNECTION_DEADLINE_S) -> None:
        self._lock = threading.Lock()
        self._name = "preview.onnx"
        self._data = b""
        self._version = 0
        self.data_url = ""  # the published model itself (for opening it in a running page)
        self.token = secrets.token_urlsafe(24)  # the path prefix every answered request carries
        self.requests: collections.deque[str] = collections.deque(maxlen=REMEMBERED)  # paths asked
        # for, the token left out (tests, debugging)
        self.build_date = build_date
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = read_timeout_s  # each read of the connection (socketserver sets it)

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                server._answer(self)

            def do_HEAD(self) -> None:  # noqa: N802
                server._answer(self)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._httpd = _BoundedServer(("127.0.0.1", 0), Handler, max_connections, deadline_s)
        self._httpd.timeout = None  # handle_request waits for a connection, however long
        self.port = self._httpd.server_address[1]
        self._hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="netron-server", daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def page_url(self) -> str:
        """Netron's page (with the model published last, if any)."""
        return f"{self.origin}/{self.token}/"

    def publish(self, data: bytes, name: str = "preview.onnx") -> str:
        """Make `data` the model the page opens; returns the page URL (new each time, so a reload
        really reloads). Thread-safe: the GUI thread publishes while the server thread answers."""
        with self._lock:
            self._version += 1
            self._data, self._name = bytes(data), name
            self.data_url = f"{self.page_url}data/{self._version}/{urllib.parse.quote(name)}"
            return f"{self.page_url}?v={self._version}"

    def _serve(self) -> None:
        """Serve until `stop`. Not `serve_forever`: it wakes every 0.5 s to look for a shutdown,
        and each wake takes the app's GIL, which the GUI thread then waits for when the machine
        is slow. This thread sleeps until a connection comes; `stop` makes one."""
        while not self._stopping:
            self._httpd.handle_request()

    @property
    def connections(self) -> tuple[int, int]:
        """(connections served now, the most served at once)."""
        return len(self._httpd.open), self._httpd.most

    def stop(self) -> None:
        self._stopping = True
        self._httpd.stop_waiting()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()  # wakes `_serve`
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._httpd.server_close()

    def _local_path(self, handler: http.server.BaseHTTPRequestHandler) -> str | int:
        """The path asked for below the token (`/index.html`), or the HTTP status refusing it."""
        if handler.headers.get("Host", "").lower() not in self._hosts:
            return 400  # DNS rebinding: a page of another name resolved to this address
        raw = urllib.parse.urlsplit(handler.path).path
        prefix, _, rest = raw.lstrip("/").partition("/")
        if not hmac.compare_digest(prefix.encode("utf-8", "replace"), self.token.encode()):
            return 404
        try:
            path = "/" + urllib.parse.unquote(rest, errors="strict")
        except UnicodeDecodeError:
            return 400
        if any(ord(c) < 0x20 or c in "\\\x7f" for c in path) or "/../" in path + "/":
            return 400  # NUL, controls, backslashes, parent steps: never a file name of Netron's
        return path

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = self._local_path(handler)
        shown = path if isinstance(path, str) else urllib.parse.urlsplit(handler.path).path
        self.requests.append(shown.replace(self.token, "<token>")[:PATH_KEPT])
        if isinstance(path, int):
            self._send(handler, path, None, "text/plain")
            return
        with self._lock:
            data, name, version = self._data, self._name, self._version
        body, ctype = None, "application/octet-stream"
        if path in ("/", "/index.html"):
            today = self.build_date or datetime.datetime.now(datetime.timezone.utc)
            html = (NETRON_DIR / "index.html").read_text(encoding="utf-8")
            # relative: Netron's page puts its own folder (the token's) before it; none published yet: no model
            file_url = f"data/{version}/{urllib.parse.quote(name)}" if version else None
            body = patched_index(html, file_url, name, today).encode("utf-8")
            ctype = "text/html"
        elif path.startswith("/data/"):
            body = data if path == f"/data/{version}/{name}" else None
        else:
            body, ctype = _static_file(path)
        self._send(handler, 200 if body is not None else 404, body, ctype)

    @staticmethod
    def _send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes | None, ctype: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body or b"")))
        handler.send_header("Cache-Control", "no-store")
        handler.end_headers()
        if body and handler.command != "HEAD":
            try:
                handler.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
