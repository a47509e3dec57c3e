"""The preview's local server (gui/preview/netron_server.py): it serves the published model on
127.0.0.1, sleeps between requests (no polling that would take the app's GIL), and stops at once."""

from __future__ import annotations

import time
import urllib.request

from onnxport.gui.preview.netron_server import PreviewServer


def _wakeups(native_id: int) -> int:
    with open(f"/proc/self/task/{native_id}/status") as f:
        return sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)


def test_the_server_serves_sleeps_between_requests_and_stops_at_once():
    server = PreviewServer()
    try:
        server.publish(b"model bytes", "m.onnx")
        with urllib.request.urlopen(server.data_url, timeout=5) as answer:
            assert answer.read() == b"model bytes"
        time.sleep(0.2)
        before = _wakeups(server._thread.native_id)
        time.sleep(1.2)  # serve_forever's loop would have woken twice to look for a shutdown
        assert _wakeups(server._thread.native_id) == before
    finally:
        t0 = time.perf_counter()
        server.stop()
    assert time.perf_counter() - t0 < 2 and not server._thread.is_alive()
