"""A loopback-only HTTP server for Netron's page and the current preview model.

Why our own instead of `netron.serve`: its `/data/` route serves any file in the model's folder,
and its page locks itself ("Please update to the newest version") 180 days after its build
date. Here:
- it binds 127.0.0.1 with an OS-chosen port;
- `/data/<name>` serves only the preview bytes published last (from memory; nothing on disk);
- Netron's static files come from the installed `netron` package, read-only, by extension;
- `index.html` gets the serving day as its build date and the current model as its file, and
  `browser.js`'s age check is switched off, so the page never ages out whatever the clock says;
- `index.html` also gets a style that wraps long names in the node sidebar (SIDEBAR_CSS).
Thread-safe: `publish()` from the GUI thread while the server thread answers requests.
"""

from __future__ import annotations

import datetime
import http.server
import re
import socket
import threading
import urllib.parse
from pathlib import Path

import netron

NETRON_DIR = Path(netron.__file__).resolve().parent
MIME = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png",
        ".ico": "image/x-icon", ".json": "application/json", ".svg": "image/svg+xml",
        ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf"}
AGE_CHECK = "if (days > 180) {"
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
        meta += (f'\n<meta name="file" content="{file_url}">\n'
                 f'<meta name="name" content="{name}">\n<meta name="identifier" content="{name}">')
    html = re.sub(r'(<meta name="version" content="[^"]*">)', lambda m: m.group(1) + "\n" + meta, html, count=1)
    return html.replace("</head>", SIDEBAR_CSS + "\n</head>", 1)


def patched_browser_js(js: str) -> str:
    """Netron's browser.js without its build-age lock-out (a no-op if the check is not found)."""
    return js.replace(AGE_CHECK, "if (false && days > 180) {")


class PreviewServer:
    """Serves Netron and one model; `url` opens the model published last."""

    def __init__(self, build_date: datetime.datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._name = "preview.onnx"
        self._data = b""
        self._version = 0
        self.data_url = ""  # the published model itself (for opening it in a running page)
        self.requests: list[str] = []  # paths asked for (tests, debugging)
        self.build_date = build_date
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                server._answer(self)

            def do_HEAD(self) -> None:  # noqa: N802
                server._answer(self)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.timeout = None  # handle_request waits for a connection, however long
        self.port = self._httpd.server_address[1]
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="netron-server", daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def publish(self, data: bytes, name: str = "preview.onnx") -> str:
        """Make `data` the model the page opens; returns the page URL (new each time, so a reload
        really reloads)."""
        with self._lock:
            self._version += 1
            self._data, self._name = bytes(data), name
            self.data_url = f"{self.origin}/data/{self._version}/{name}"
            return f"{self.origin}/?v={self._version}"

    def _serve(self) -> None:
        """Serve until `stop`. Not `serve_forever`: it wakes every 0.5 s to look for a shutdown,
        and each wake takes the app's GIL, which the GUI thread then waits for when the machine
        is slow. This thread sleeps until a connection comes; `stop` makes one."""
        while not self._stopping:
            self._httpd.handle_request()

    def stop(self) -> None:
        self._stopping = True
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()  # wakes `_serve`
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._httpd.server_close()

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = urllib.parse.unquote(urllib.parse.urlparse(handler.path).path)
        self.requests.append(path)
        with self._lock:
            data, name, version = self._data, self._name, self._version
        body, ctype = None, "application/octet-stream"
        if path in ("/", "/index.html"):
            today = self.build_date or datetime.datetime.now(datetime.timezone.utc)
            html = (NETRON_DIR / "index.html").read_text(encoding="utf-8")
            file_url = f"/data/{version}/{name}" if version else None  # nothing published yet: no model
            body = patched_index(html, file_url, name, today).encode("utf-8")
            ctype = "text/html"
        elif path.startswith("/data/"):
            body = data if path == f"/data/{version}/{name}" else None
        else:
            file = (NETRON_DIR / path.lstrip("/")).resolve()
            if file.parent == NETRON_DIR and file.suffix in MIME and file.is_file():
                body = file.read_bytes()
                ctype = MIME[file.suffix]
                if file.name == "browser.js":
                    body = patched_browser_js(body.decode("utf-8")).encode("utf-8")
        handler.send_response(200 if body is not None else 404)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(body or b"")))
        handler.send_header("Cache-Control", "no-store")
        handler.end_headers()
        if body and handler.command != "HEAD":
            try:
                handler.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
