"""Nothing the app does leaves the machine: open -> preview -> export -> validate, watched twice.

(a) the page's request interceptor logs every request; none to a host off the machine got through
    (judged here from the URL itself, not by the interceptor's own rule);
(b) every ~50 ms the sockets of this process and all its children (QtWebEngineProcess...) are
    read from /proc (tests/gui/preview/net_watch.py); none ever had a remote address off the machine (a
    connect()ed UDP socket counts, even if it sent nothing) - with one exception, named below.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse

import pytest

from onnxport.gui.dialogs.export_dialog import ExportChoices

from .net_watch import NetWatch, SocketSeen, off_machine

pytestmark = pytest.mark.gui

# Chromium's IPv6 reachability probe (net/dns/host_resolver_manager.cc, kIPv6ProbeAddress): before
# a host lookup - 127.0.0.1 included - at most once a second, it connect()s a UDP socket to Google's
# public resolver, reads the local address the route would use, and closes it. strace here showed
# exactly socket(AF_INET6, SOCK_DGRAM) -> connect -> getsockname -> close: no datagram is sent
# (a UDP connect() sends no packet), and no Chromium switch turns it off.
IPV6_PROBE = ("2001:4860:4860::8888", {53, 443})


def chromium_ipv6_probe(sock: SocketSeen) -> bool:
    return sock.table == "udp6" and sock.remote[0] == IPV6_PROBE[0] and sock.remote[1] in IPV6_PROBE[1]


def leaves_the_machine(url: str) -> bool:
    """A URL whose host is neither absent nor loopback (localhost, 127/8, ::1, ::ffff:127/104)."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in ("", "localhost"):
        return False
    try:
        return off_machine(str(ipaddress.ip_address(host)))
    except ValueError:
        return True  # a DNS name


@pytest.fixture
def watch():
    """Watching from before the window (and its WebEngine page and server) exists."""
    with NetWatch(interval=0.05) as net_watch:
        yield net_watch


def test_open_preview_export_validate_stays_on_this_machine(qtbot, watch, window, example, tmp_path):
    out = tmp_path / "model.onnx"
    ended = []
    window.jobEnded.connect(lambda name, how: ended.append((name, how)))
    window.tabs.setCurrentWidget(window.preview)  # Chromium does not lay out pages nobody sees
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(example)
    drawn = window.preview.wait_rendered(300)
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, validate=True))
    qtbot.waitUntil(lambda: window.job is None, timeout=300_000)
    with qtbot.waitSignal(window.jobEnded, timeout=300_000):
        window.validate_last()
    # the page asks for something outside (the interceptor's positive control), after it drew
    # the graph: its start-up requests (analytics included) were made by then
    interceptor = window.preview.view.interceptor
    window.preview.view.run("fetch('https://example.com/privacy-probe').catch(() => null); 1")
    qtbot.waitUntil(lambda: any("privacy-probe" in u for u in interceptor.blocked), timeout=300_000)
    # the watcher's positive control: the preview server speaks HTTP/1.0, so the page's own
    # connections last a few ms and a 50 ms poll may miss them all; this loopback listener never
    # answers, so the page's connection to it (from Chromium's network service) stays open until
    # the watcher has seen it
    with socket.create_server(("127.0.0.1", 0)) as hold:
        hold_port = hold.getsockname()[1]
        window.preview.view.run(f"fetch('http://127.0.0.1:{hold_port}/hold').catch(() => null); 1")

        def page_holds_a_connection() -> bool:
            watch.poll()
            return any(s.remote == ("127.0.0.1", hold_port) for s in watch.seen)

        qtbot.waitUntil(page_holds_a_connection, timeout=300_000)

    # the flow really ran: Netron drew the pruned graph, the export was written and validated
    expected = window.session.selection(window.model.checked_outputs()).preview
    assert drawn == len(expected.graph.node) > 0
    assert out.exists() and ("validate", "returned") in ended

    # (a) the interceptor saw every request of the page and let none through to another machine
    log = interceptor.entries()
    through = [r.url for r in log if not r.blocked]
    assert any("/data/" in u for u in through)  # it saw the model being fetched
    assert [u for u in through if leaves_the_machine(u)] == []
    assert any("privacy-probe" in r.url and r.blocked for r in log)

    # (b) the sockets: the watcher saw WebEngine's processes and the page's loopback traffic, and
    # nothing with a remote end elsewhere
    assert len(watch.pids) > 1  # WebEngine's processes; that it watched them: the held connection above
    assert any(p.startswith("/data/") for p in window.preview.server.requests)  # page -> preview server
    assert [str(s) for s in watch.off_machine if not chromium_ipv6_probe(s)] == []


def test_chromium_resolves_no_host_but_the_preview_server(qtbot, window, example):
    """The resolver rule (gui/app.py): even a request the interceptor lets through (localhost is
    loopback) finds no address, so it never reaches a server; 127.0.0.1 still works."""
    window.tabs.setCurrentWidget(window.preview)
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(example)
    assert window.preview.wait_rendered(300) > 0  # 127.0.0.1 resolves
    view, server = window.preview.view, window.preview.server
    fetch = (f"fetch('http://localhost:{server.port}/resolver-probe', {{mode: 'no-cors'}})"
             ".then(() => window.__probe = 'reached', () => window.__probe = 'failed'); 1")
    view.run(fetch)
    answers = []

    def answered() -> bool:
        view.run("window.__probe || ''", answers.append)
        return bool(answers and answers[-1])

    qtbot.waitUntil(answered, timeout=300_000)
    assert any("localhost" in r.url and not r.blocked for r in view.interceptor.entries())  # let through...
    assert answers[-1] == "failed"  # ...yet it found no address
    assert not any("resolver-probe" in p for p in server.requests)


def test_the_privacy_flags_keep_what_the_user_set():
    from onnxport.gui.app import PRIVACY_DISABLED_FEATURES, chromium_flags

    mine = chromium_flags("--no-sandbox --disable-features=Foo,Bar --lang=de", as_root=False)
    assert mine.split()[:2] == ["--no-sandbox", "--lang=de"]
    assert '--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"' in mine and "--no-pings" in mine
    assert mine.count("--disable-features=") == 1  # Chromium would keep only the last one
    assert mine.endswith("--disable-features=Foo,Bar," + ",".join(PRIVACY_DISABLED_FEATURES))
    assert chromium_flags(mine, as_root=True) == mine  # composing twice changes nothing
    theirs = chromium_flags('--host-resolver-rules="MAP * 10.0.0.1"', as_root=True)
    assert theirs.count("--host-resolver-rules") == 1 and "MAP * 10.0.0.1" in theirs and "--no-sandbox" in theirs
    assert "--no-sandbox" not in chromium_flags("", as_root=False)
