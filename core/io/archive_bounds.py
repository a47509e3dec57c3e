"""Opening zip archives (.npz, PyTorch zip state_dicts) with their sizes checked first.

Contract: `open_zip(path, what)` returns a `zipfile.ZipFile` whose every member was checked
against the file (see `check_zip_members`), or raises `CorruptFileError` with one line naming the
file and the member. Why: zipfile trusts the central directory; a crafted member can declare
terabytes (or inflate 1000:1 from a few megabytes), and whoever reads it allocates that much.
The limits and their reasons are in `budgets`.
"""

from __future__ import annotations

import lzma
import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.budgets import (
    ARCHIVE_MEMBERS_MAX,
    MAX_INFLATE_RATIO,
    archive_member_limit,
    archive_total_limit,
    human_bytes,
)
from onnxport.core.util.errors import CorruptFileError

LOCAL_HEADER_SIZE = 30
READABLE_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
# What zipfile may raise on a crafted archive (it does not always say BadZipFile).
# zlib.error / LZMAError: a corrupt compressed member; ValueError includes UnicodeDecodeError (a name).
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error, NotImplementedError, RuntimeError,
              zlib.error, lzma.LZMAError)


def open_zip(path: Path, what: str, hint: str = "") -> zipfile.ZipFile:
    """A ZipFile of `path` whose members passed `check_zip_members`; `what` names the kind ('.npz')."""
    regular_file(path)
    check_member_count(path, what)
    try:
        zf = zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        raise CorruptFileError(f"{path}: not a readable {what} ({exc})") from None
    try:
        check_zip_members(path, zf.infolist(), path.stat().st_size, hint)
    except BaseException:
        zf.close()
        raise
    return zf


def check_member_count(path: Path, what: str) -> None:
    """Refuse an archive whose end record declares over ARCHIVE_MEMBERS_MAX members, before
    zipfile builds an object per member (time and memory just to list them)."""
    try:
        with open(path, "rb") as f:
            end = zipfile._EndRecData(f)  # the end-of-central-directory record (zip64 too), as zipfile reads it
    except (OSError, ValueError, struct.error, EOFError):
        return  # zipfile says what is wrong
    count = end[zipfile._ECD_ENTRIES_TOTAL] if end else 0
    if count > ARCHIVE_MEMBERS_MAX:
        raise CorruptFileError(f"{path}: a {what} of {count:,} members; onnxport reads at most {ARCHIVE_MEMBERS_MAX:,}")


def check_zip_members(path: Path, infos: list[zipfile.ZipInfo], file_size: int, hint: str = "") -> None:
    """Refuse members that are encrypted, use unknown compression, lie about their stored size,
    end past the file, or declare more uncompressed bytes than the budgets allow."""
    advice = f" ({hint})" if hint else ""
    total = 0
    for info in infos:
        where = f"{path}: member '{info.filename}'"
        if info.flag_bits & 0x1:
            raise CorruptFileError(f"{where} is encrypted; onnxport reads plain archives only")
        if info.compress_type not in READABLE_METHODS:
            raise CorruptFileError(f"{where} uses an unsupported compression method ({info.compress_type})")
        if info.header_offset + LOCAL_HEADER_SIZE + info.compress_size > file_size:
            raise CorruptFileError(f"{where} ends past the end of the file (truncated?)")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise CorruptFileError(f"{where} is stored uncompressed but declares {info.file_size} bytes "
                                   f"in {info.compress_size}")
        if info.file_size > archive_member_limit(info.compress_size):
            raise CorruptFileError(
                f"{where} declares {human_bytes(info.file_size)} uncompressed from "
                f"{human_bytes(info.compress_size)} (over {MAX_INFLATE_RATIO}:1); refused as a likely zip bomb"
                f"{advice}")
        total += info.file_size
    if total > archive_total_limit(file_size):
        raise CorruptFileError(
            f"{path}: members declare {human_bytes(total)} uncompressed in all from a "
            f"{human_bytes(file_size)} file (over {MAX_INFLATE_RATIO}:1); refused as a likely zip bomb{advice}")


def stored_data_offset(f: BinaryIO, info: zipfile.ZipInfo, size: int) -> int | None:
    """File offset of a stored (uncompressed) member's bytes, from its local header in the open
    file `f` of `size` bytes; None when compressed or when the local header does not line up."""
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        return None
    f.seek(info.header_offset)
    head = f.read(LOCAL_HEADER_SIZE)
    if len(head) < LOCAL_HEADER_SIZE or head[:4] != b"PK\x03\x04":
        return None
    name_len, extra_len = struct.unpack_from("<HH", head, 26)
    start = info.header_offset + LOCAL_HEADER_SIZE + name_len + extra_len
    return start if start + info.compress_size <= size else None
