"""The preview's local server (gui/preview/netron_server.py): it serves the published model on
127.0.0.1, sleeps between requests (no polling that would take the app's GIL), and stops at once."""

from __future__ import annotations

import socketserver
import threading
import urllib.request

from onnxport.gui.preview.netron_server import PreviewServer


def test_the_server_serves_sleeps_between_requests_and_stops_at_once(monkeypatch):
    """Every wait of the server's thread is a select with no timeout: it wakes for a connection
    only (serve_forever's loop selects with 0.5 s to look for a shutdown). Judged from the waits
    it asks for, not from counting its wake-ups over a sleep."""
    waits: list[tuple[str, float | None]] = []

    class Recording(socketserver._ServerSelector):
        def select(self, timeout=None):
            waits.append((threading.current_thread().name, timeout))
            return super().select(timeout)

    monkeypatch.setattr(socketserver, "_ServerSelector", Recording)
    server = PreviewServer()
    try:
        server.publish(b"model bytes", "m.onnx")
        with urllib.request.urlopen(server.data_url, timeout=60) as answer:
            assert answer.read() == b"model bytes"
    finally:
        server.stop()  # joins the thread (a bound against a hang: 5 s), which a connection woke
    assert not server._thread.is_alive()
    served = [timeout for thread, timeout in waits if thread == "netron-server"]
    assert served and all(timeout is None for timeout in served)
