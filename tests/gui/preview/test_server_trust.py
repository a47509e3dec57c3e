"""The preview server answers only the app's page (issue 27, item 9): real HTTP requests over
loopback to the real server. Without its token or with another `Host:` it gives nothing; bad paths
get 400/404 without a traceback; what it remembers of requests stays bounded."""

from __future__ import annotations

import http.client
import urllib.parse

import pytest

from onnxport.gui.preview.netron_server import PATH_KEPT, REMEMBERED, PreviewServer


@pytest.fixture
def server():
    server = PreviewServer()
    server.publish(b"the graph", "m.onnx")
    yield server
    server.stop()


def get(server: PreviewServer, path: str, host: str | None = "127.0.0.1") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", f"{host}:{server.port}" if ":" not in host else host)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def test_the_page_and_the_model_are_served_only_under_the_token(server):
    token_path = urllib.parse.urlsplit(server.page_url).path
    assert len(server.token) >= 32 and token_path == f"/{server.token}/"
    assert get(server, urllib.parse.urlsplit(server.data_url).path) == (200, b"the graph")
    status, page = get(server, token_path)
    assert status == 200 and b'content="data/1/m.onnx"' in page
    assert get(server, token_path + "index.js")[0] == 200
    for path in ("/", "/index.html", "/data/1/m.onnx", "/index.js", f"/{server.token[:-1]}x/data/1/m.onnx",
                 f"/{server.token}x/data/1/m.onnx", f"/x/{server.token}/data/1/m.onnx"):
        assert get(server, path) == (404, b""), path


def test_another_host_name_gets_nothing(server):
    """DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own name as Host."""
    data = urllib.parse.urlsplit(server.data_url).path
    assert get(server, data, host="localhost") == (200, b"the graph")
    for host in ("evil.example", "127.0.0.1.evil.example", "127.0.0.1:1", "0.0.0.0"):
        assert get(server, data, host=host) == (400, b""), host
    assert get(server, data, host=None) == (400, b"")


def test_bad_paths_get_400_or_404_without_a_traceback(server, capfd):
    token = f"/{server.token}"
    for path, status in [("/x%00.js", 404), (f"{token}/x%00.js", 400), (f"{token}/%ff.js", 400),
                         (f"{token}/..%2fpyproject.toml", 400), (f"{token}/a%5c..%5cindex.js", 400),
                         (f"{token}/%1b[31m.js", 400), (f"{token}/{'a' * 60_000}.js", 404),
                         (f"{token}/data/1/m.onnx%00", 400)]:
        assert get(server, path)[0] == status, path
    assert get(server, urllib.parse.urlsplit(server.data_url).path)[0] == 200  # still serving
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out and server._httpd.errors == 0


def test_what_the_server_remembers_is_bounded(server):
    for i in range(REMEMBERED + 50):
        get(server, f"/{server.token}/data/{i}{'a' * 20_000}")
    assert len(server.requests) == REMEMBERED
    assert all(len(p) <= PATH_KEPT for p in server.requests)
    assert server.requests[-1].startswith(f"/data/{REMEMBERED + 49}a")  # the token is never kept


def test_published_names_are_escaped_in_the_page(server):
    server.publish(b"g", 'm"><script>alert(1)</script>.onnx')
    status, page = get(server, f"/{server.token}/")
    assert status == 200 and b"<script>alert" not in page and b"&quot;&gt;&lt;script&gt;" in page
    assert get(server, urllib.parse.urlsplit(server.data_url).path) == (200, b"g")
