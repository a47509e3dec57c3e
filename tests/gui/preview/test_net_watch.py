"""The socket watcher (tests/gui/preview/net_watch.py) must catch what it is there to catch.

Every "off the machine" socket here is UDP connect()ed to a documentation address (192.0.2.0/24,
2001:db8::/32): a UDP connect() only records the peer, it sends no packet, so nothing leaves.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

import pytest

from .net_watch import NetWatch, decode_address, off_machine, parse_table, snapshot


def connected_udp(family: int, address: tuple) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.connect(address)  # no packet: UDP connect only sets the default destination
    except OSError as exc:  # no route for this family on this machine
        sock.close()
        pytest.skip(f"cannot connect a UDP socket to {address[0]} here: {exc}")
    return sock


def test_addresses_as_the_kernel_prints_them():
    assert decode_address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert decode_address("00000000000000000000000001000000:0035") == ("::1", 53)
    assert decode_address("0000000000000000FFFF00000100007F:0001") == ("::ffff:127.0.0.1", 1)
    assert [off_machine(a) for a in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::")] \
        == [False] * 6
    assert [off_machine(a) for a in ("192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1", "10.0.0.1")] == [True] * 4
    table = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
             "   0: 0100007F:1F90 0102000A:0035 01 00000000:00000000 00:00000000 00000000     0        0 4242 1")
    assert parse_table(table) == {4242: (("127.0.0.1", 8080), ("10.0.2.1", 53), 1)}


def test_it_sees_this_process_connect_udp_off_the_machine():
    with connected_udp(socket.AF_INET, ("192.0.2.1", 9)) as sock:
        mine = [s for s in snapshot() if s.local == sock.getsockname()[:2]]
    assert [(s.table, s.remote) for s in mine] == [("udp", ("192.0.2.1", 9))]
    assert off_machine(mine[0].remote[0])


def test_loopback_and_unconnected_sockets_are_seen_but_not_flagged():
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()) as client, \
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as unconnected:
        unconnected.bind(("::", 0))
        watch = NetWatch().start()
        watch.stop()
        server_port = server.getsockname()[1]
        ports = {client.getsockname()[1], server_port, unconnected.getsockname()[1]}
    mine = [s for s in watch.seen if s.local[1] in ports]
    assert {s.table for s in mine} >= {"tcp", "udp6"}
    assert any(s.remote == ("127.0.0.1", server_port) for s in mine)  # the client's peer
    assert any(s.table == "udp6" and s.remote == ("::", 0) for s in mine)
    assert not [s for s in mine if off_machine(s.remote[0])]


def test_the_watch_thread_catches_a_grandchild_connecting_udp6_off_the_machine():
    """Like Chromium's IPv6 probe, in a process two levels down (the watcher walks the tree)."""
    script = textwrap.dedent("""
        import socket, sys
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            s.connect(("2001:db8::1", 53))
        except OSError:
            print("no-route", flush=True); sys.exit(0)
        print("connected", flush=True)
        sys.stdin.readline()
    """)
    with NetWatch(interval=0.05) as watch:
        # a shell in between (its last command a builtin, so it cannot exec python in its place)
        command = f'"{sys.executable}" -c \'{script}\'; status=$?; exit $status'
        child = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            said = child.stdout.readline().strip()
            if said == "no-route":
                pytest.skip("no IPv6 route here")
            start, give_up = watch.polls, time.monotonic() + 30  # (a bound, not a verdict)
            while watch.polls < start + 3:  # three polls by the thread while the socket is open
                assert child.poll() is None and time.monotonic() < give_up
                time.sleep(0.02)
        finally:
            child.communicate("", timeout=60)
    caught = watch.off_machine
    assert said == "connected"
    assert [(s.table, s.remote) for s in caught] == [("udp6", ("2001:db8::1", 53))]
    assert caught[0].pid not in (child.pid,) and caught[0].pid in watch.pids  # the grandchild, not sh
