"""Crafted (hostile) files for the memory-bound tests, built cheaply, and a bounded runner.

- `write_zip(path, members)`: a zip64 archive from raw members, whose declared sizes can lie.
- `deflated_zeros(name, head, n)`: a deflate member of `head` + n zero bytes built from one
  compressed 1 MiB block repeated (full-flush blocks are independent), so a 4 GiB bomb takes
  milliseconds and ~4 MB; its CRC is left 0 when big (readers must refuse it before they get that far).
- `run_bounded(code)`: run Python code in a subprocess under RLIMIT_AS (and RLIMIT_CPU if asked),
  so a missing guard fails the test instead of exhausting the machine; the wall clock only bounds
  a child that blocks (HANG_S), never a verdict (a loaded machine is slow, not wrong).
"""

from __future__ import annotations

import io
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

ZIP_STORED, ZIP_DEFLATED = 0, 8
Member = tuple[str, int, bytes, int, int]  # name, method, payload, declared uncompressed size, crc


def npy_header(shape: tuple[int, ...], descr: str | list = "<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def stored(name: str, data: bytes, declared: int | None = None) -> Member:
    return (name, ZIP_STORED, data, len(data) if declared is None else declared, zlib.crc32(data))


def deflated_zeros(name: str, head: bytes, zeros: int, declared: int | None = None, chunk: int = 1 << 20) -> Member:
    first = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [first.compress(head), first.flush(zlib.Z_FULL_FLUSH)]
    block_c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = block_c.compress(bytes(chunk)) + block_c.flush(zlib.Z_FULL_FLUSH)
    count, rest = divmod(zeros, chunk)
    parts.append(block * count)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts.append(last.compress(bytes(rest)) + last.flush(zlib.Z_FINISH))
    size = len(head) + zeros if declared is None else declared
    crc = zlib.crc32(head + bytes(zeros)) if zeros <= chunk else 0  # small: readers reach the end
    return (name, ZIP_DEFLATED, b"".join(parts), size, crc)


def write_zip(path: Path, members: list[Member], flag_bits: int = 0) -> Path:
    """A zip64 archive holding `members` exactly as given (sizes as declared, not as stored)."""
    out, central = bytearray(), bytearray()
    for name, method, payload, size, crc in members:
        fname, offset = name.encode(), len(out)
        extra = struct.pack("<HHQQ", 1, 16, size, len(payload))
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, flag_bits, method, 0, 0, crc, 0xFFFFFFFF,
                           0xFFFFFFFF, len(fname), len(extra)) + fname + extra + payload
        cextra = struct.pack("<HHQQQ", 1, 24, size, len(payload), offset)
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, flag_bits, method, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(cextra), 0, 0, 0, 0, 0xFFFFFFFF)
        central += fname + cextra
    cd_offset, n = len(out), len(members)
    out += central
    out += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(central), cd_offset)
    out += struct.pack("<4sIQI", b"PK\x06\x07", 0, cd_offset + len(central), 1)
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path.write_bytes(bytes(out))
    return path


def npz_bomb(path: Path, gib: int = 4) -> Path:
    """An .npz of one float32 array 'w' declaring (and inflating to) `gib` GiB from ~1 MB per GiB."""
    n = gib << 28  # float32 elements
    return write_zip(path, [deflated_zeros("w.npy", npy_header((n,)), 4 * n)])


def write_safetensors_raw(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


HANG_S = 600.0  # a child that blocks (a pipe opened, a lock) fails after this: a bound, not a measurement


def run_bounded(code: str, limit_gb: float = 2.0, timeout: float = HANG_S, args: list[str] | None = None,
                cwd: Path | None = None, cpu_s: int | None = None) -> subprocess.CompletedProcess:
    """Run `python -c code` (or `python -m ... args`) under RLIMIT_AS = limit_gb, RLIMIT_CPU = cpu_s
    CPU seconds when given (past it SIGXCPU ends the child: returncode -SIGXCPU, however loaded the
    machine) and a wall-clock bound against a hang."""
    limit = int(limit_gb * (1 << 30))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, resource.RLIM_INFINITY))

    command = [sys.executable, *(args if args is not None else ["-c", code])]
    return subprocess.run(command, preexec_fn=cap, capture_output=True, text=True, timeout=timeout, cwd=cwd)
