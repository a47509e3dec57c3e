"""The preview server's connections are bounded (issue 36, item 5): no token is needed to connect,
so 100 idle local connections pinned 99 server threads for good. Now at most `max_connections` are
served at once, an idle one is closed after the read timeout, a client sending a byte at a time is
cut once others wait for its place, and the page is still answered. Real sockets over loopback;
the waits are for the server's answers (a read that returns), never for time."""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse

import pytest

from onnxport.gui.preview.netron_server import PreviewServer

LIMIT = 4


@pytest.fixture
def server():
    server = PreviewServer(read_timeout_s=0.25, max_connections=LIMIT, deadline_s=1.0)
    server.publish(b"the graph", "m.onnx")
    yield server
    server.stop()


def server_threads() -> int:
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def closed_by_server(conn: socket.socket) -> bool:
    """Whether the server closed `conn` (a read returns nothing); the read waits for that."""
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def get_model(server: PreviewServer) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request("GET", urllib.parse.urlsplit(server.data_url).path, headers={"Host": f"127.0.0.1:{server.port}"})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_idle_connections_pin_no_threads_and_the_page_is_still_served(server):
    before = server_threads()
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=60) for _ in range(100)]
    try:
        assert get_model(server) == (200, b"the graph")  # answered once idle ones timed out
        assert server.connections[1] <= LIMIT and server_threads() - before <= LIMIT
        assert all(closed_by_server(conn) for conn in idle[:LIMIT])  # the first ones, read timed out
    finally:
        for conn in idle:
            conn.close()


@pytest.fixture
def patient_server():
    """A read timeout no trickle misses, however loaded the machine: only the deadline frees a place."""
    server = PreviewServer(read_timeout_s=600, max_connections=LIMIT, deadline_s=1.0)
    server.publish(b"the graph", "m.onnx")
    yield server
    server.stop()


def test_a_client_sending_a_byte_at_a_time_is_cut_when_others_wait(patient_server):
    server = patient_server
    slow = [socket.create_connection(("127.0.0.1", server.port), timeout=60) for _ in range(LIMIT)]
    try:
        for conn in slow:  # each keeps its connection alive inside the read timeout...
            conn.sendall(b"G")
        stop = threading.Event()

        def trickle() -> None:
            while not stop.wait(0.05):  # ...sending a byte well within each read timeout
                for conn in slow:
                    try:
                        conn.sendall(b"E")
                    except OSError:
                        pass

        feeder = threading.Thread(target=trickle, daemon=True)
        feeder.start()
        try:
            assert get_model(server) == (200, b"the graph")  # their places were taken back
        finally:
            stop.set()
            feeder.join()
        assert server.connections[1] <= LIMIT
    finally:
        for conn in slow:
            conn.close()
