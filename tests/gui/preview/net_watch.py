"""Watch the sockets of a process tree and keep every one whose remote end is off this machine.

Why: the page's request interceptor (gui/preview/netron_view.py) only sees URL requests. Chromium also
opens sockets of its own (DNS lookups, prefetches, an IPv6 reachability probe that connect()s a
UDP socket to a public resolver), and QtWebEngineProcess children do their own work. This looks at
the sockets themselves, from the kernel's side, for this process and all its descendants:

- the tree: /proc/<pid>/task/*/children, recursively (psutil where that file is missing);
- each process's sockets: /proc/<pid>/fd/* -> ``socket:[inode]``;
- each socket's addresses: the inode's line in /proc/<pid>/net/{tcp,tcp6,udp,udp6,raw,raw6}
  (read through the process, so a child in another network namespace is read in its own).

A connect()ed UDP socket shows its peer as the remote address although it sent nothing; an
unconnected one shows 0.0.0.0:0 / [::]:0, which is fine. Loopback (127/8, ::1, ::ffff:127/104)
is fine. Anything else is "off the machine". `NetWatch` polls in a thread (every 50 ms by
default): a socket opened and closed between two polls is not seen, so a clean result is strong
evidence, not proof; the interceptor's log covers the URL side exactly.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

TABLES = ("tcp", "tcp6", "udp", "udp6", "raw", "raw6")
PROC = Path("/proc")
HAVE_CHILDREN_FILES = (PROC / "self" / "task" / str(os.getpid()) / "children").exists()


@dataclass(frozen=True)
class SocketSeen:
    pid: int
    table: str  # which /proc/net table: tcp, tcp6, udp, udp6, raw, raw6
    inode: int
    local: tuple[str, int]
    remote: tuple[str, int]
    state: int  # the kernel's TCP state number (UDP: 1 connected, 7 not)

    def __str__(self) -> str:
        return (f"pid {self.pid} {self.table} {self.local[0]}:{self.local[1]} -> "
                f"{self.remote[0]}:{self.remote[1]} (state {self.state:#x}, inode {self.inode})")


def off_machine(address: str) -> bool:
    """True if `address` is a peer on another machine (not loopback, not unset)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_loopback or ip.is_unspecified)


def decode_address(text: str) -> tuple[str, int]:
    """'0100007F:1F90' (or 32 hex digits for IPv6) -> ('127.0.0.1', 8080). The kernel prints the
    address as 32-bit words in host byte order, the port as a plain number."""
    host, port = text.split(":")
    raw = b"".join(struct.pack("=I", int(host[i:i + 8], 16)) for i in range(0, len(host), 8))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port, 16)


def parse_table(text: str) -> dict[int, tuple[tuple[str, int], tuple[str, int], int]]:
    """inode -> (local, remote, state) for one /proc/net/{tcp,udp,raw}[6] file."""
    rows = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        rows[int(fields[9])] = (decode_address(fields[1]), decode_address(fields[2]), int(fields[3], 16))
    return rows


def process_tree(root: int) -> list[int]:
    """`root` and all its living descendants."""
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo.extend(children(pid))
    return seen


def children(pid: int) -> list[int]:
    """The direct children of `pid` (empty if it is gone)."""
    if not HAVE_CHILDREN_FILES:  # a kernel without CONFIG_PROC_CHILDREN
        import psutil

        try:
            return [p.pid for p in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    tasks = PROC / str(pid) / "task"
    found: list[int] = []
    try:
        for tid in os.listdir(tasks):
            found.extend(int(c) for c in (tasks / tid / "children").read_text().split())
    except OSError:  # the process or one of its threads ended meanwhile
        pass
    return found


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets `pid` holds open now (empty if it is gone)."""
    fd_dir = PROC / str(pid) / "fd"
    inodes = set()
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def snapshot(root: int | None = None) -> list[SocketSeen]:
    """Every TCP/UDP/raw socket the process tree under `root` (default: this process) holds now."""
    return sockets_of(process_tree(os.getpid() if root is None else root))


def sockets_of(pids: list[int]) -> list[SocketSeen]:
    """Every TCP/UDP/raw socket the processes `pids` hold now."""
    found = []
    tables_by_netns: dict[str, dict[str, dict]] = {}
    for pid in pids:
        inodes = socket_inodes(pid)
        if not inodes:
            continue
        try:
            netns = os.readlink(PROC / str(pid) / "ns" / "net")
        except OSError:
            continue
        tables = tables_by_netns.get(netns)
        if tables is None:
            tables = tables_by_netns[netns] = {}
            for name in TABLES:
                try:
                    tables[name] = parse_table((PROC / str(pid) / "net" / name).read_text())
                except OSError:
                    tables[name] = {}
        for name, rows in tables.items():
            for inode in inodes & rows.keys():
                local, remote, state = rows[inode]
                found.append(SocketSeen(pid, name, inode, local, remote, state))
    return found


class NetWatch:
    """Poll `snapshot(root)` every `interval` seconds in a thread, between start() and stop()
    (or as a context manager). `seen`: every distinct socket observed; `off_machine`: those whose
    remote address is off this machine; `pids`: every process of the tree seen; `polls`: how many
    snapshots were taken. An error in the thread is raised again by stop()."""

    def __init__(self, root: int | None = None, interval: float = 0.05) -> None:
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.seen: set[SocketSeen] = set()
        self.pids: set[int] = set()
        self.polls = 0
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="net-watch", daemon=True)

    @property
    def off_machine(self) -> list[SocketSeen]:
        with self._lock:
            return sorted((s for s in self.seen if off_machine(s.remote[0])), key=str)

    def poll(self) -> None:
        """One snapshot now (the thread calls it; tests may too, e.g. right after a connect)."""
        pids = process_tree(self.root)
        sockets = sockets_of(pids)
        with self._lock:
            self.pids.update(pids)
            self.seen.update(sockets)
            self.polls += 1

    def start(self) -> NetWatch:
        self.poll()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.poll()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> NetWatch:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except BaseException as exc:  # noqa: BLE001 - handed to stop()
                self._error = exc
                return
