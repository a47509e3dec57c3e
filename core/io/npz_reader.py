"""The one reader of numpy .npz archives: parameters (param_files) and input data (feeds).

Contract: `list_npz(path)` returns the archive's arrays as `NpzMember`s (name, shape, dtype as
stored, order, and the file offset of the raw bytes when stored uncompressed) without reading
any array; `read_member(path, member)` returns one array's values, allocating exactly the bytes
its header declares. Both raise `CorruptFileError` with one line naming the file and the array.

Bounds, all checked before anything is allocated: the archive passes `archive_bounds.open_zip`
(declared sizes vs the file, inflate ratio: see `budgets`); each .npy header's shape x dtype must
fit in its member's declared uncompressed size, which zipfile never reads past; a stored
member's bytes must lie inside the file; at most MEMBERS_MAX arrays, each name once. Object
arrays are refused: no pickle is ever loaded.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnxport.core.io.archive_bounds import ZIP_ERRORS, open_zip, stored_data_offset
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.util.budgets import ARCHIVE_MEMBERS_MAX, MiB, human_bytes
from onnxport.core.util.errors import CorruptFileError, cannot_read

NPZ_HINT = "if it is genuine, save it uncompressed with np.savez"
READ_CHUNK = 16 * MiB
NUMERIC_KINDS = "biufc"  # bool, int, uint, float, complex
MEMBERS_MAX = ARCHIVE_MEMBERS_MAX  # arrays one archive may hold (safetensors headers allow ~190,000)


@dataclass(frozen=True)
class NpzMember:
    """One array of an .npz, as its headers declare it (checked against the file)."""

    name: str  # the array's key: the member's name without ".npy"
    member: str  # the zip member's name
    shape: tuple[int, ...]
    dtype: np.dtype  # as stored: may be big-endian
    fortran: bool
    header_bytes: int  # length of the .npy header; the array's bytes follow it
    data_offset: int | None  # file offset of the raw bytes when stored uncompressed, else None

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @property
    def raw_little_c(self) -> bool:
        """True when the bytes at `data_offset` are the array in little-endian C order."""
        little = self.dtype.byteorder in "<|=" or self.dtype.itemsize == 1
        return self.data_offset is not None and not self.fortran and little


def list_npz(path: str | Path) -> list[NpzMember]:
    """The arrays of an .npz (members not named *.npy are ignored); reads headers only."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise cannot_read(path, exc, CorruptFileError) from None
    members: dict[str, NpzMember] = {}
    with open_zip(path, ".npz", NPZ_HINT) as zf, open(path, "rb") as raw:
        infos = [info for info in zf.infolist() if info.filename.endswith(".npy")]
        if len(infos) > MEMBERS_MAX:  # each header is parsed in Python: 500,000 took minutes
            raise CorruptFileError(f"{path}: holds {len(infos):,} arrays; onnxport reads at most {MEMBERS_MAX:,}")
        for info in infos:
            if info.filename in members:
                raise CorruptFileError(f"{path}: array '{info.filename[:-4][:120]}' appears twice")
            members[info.filename] = _member(path, zf, raw, info, size)
    return list(members.values())


def _member(path: Path, zf: zipfile.ZipFile, raw, info: zipfile.ZipInfo, size: int) -> NpzMember:
    name = info.filename[: -len(".npy")]
    where = f"{path}: array '{name}'"
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = _read_npy_header(f, version)
            header_bytes = f.tell()
    except ZIP_ERRORS as exc:
        raise CorruptFileError(f"{where}: not a readable .npy entry ({_first_line(exc)})") from None
    except Exception as exc:  # numpy parses the header (<= 10,000 characters) with ast/tokenize: many types
        raise CorruptFileError(f"{where}: not a readable .npy header ({type(exc).__name__})") from None
    if any(d < 0 for d in shape):
        raise CorruptFileError(f"{where}: its header declares negative dimensions {list(shape)}")
    problem = shape_problem(shape, dtype.itemsize)
    if problem:
        raise CorruptFileError(f"{where} {problem}")
    if dtype.hasobject:
        raise CorruptFileError(f"{where}: holds Python objects; onnxport reads numeric arrays only")
    if dtype.kind not in NUMERIC_KINDS or dtype.names is not None or dtype.subdtype is not None:
        raise CorruptFileError(f"{where}: unsupported dtype {dtype}; onnxport reads numeric arrays only")
    member = NpzMember(name, info.filename, tuple(int(d) for d in shape), dtype, bool(fortran), header_bytes, None)
    holds = info.file_size - header_bytes
    if member.nbytes > holds:
        raise CorruptFileError(f"{where}: its header declares {dtype}{list(member.shape)} "
                               f"({human_bytes(member.nbytes)}) but the archive holds {human_bytes(max(holds, 0))}")
    start = stored_data_offset(raw, info, size)
    if start is None:
        return member
    return NpzMember(member.name, member.member, member.shape, dtype, member.fortran, header_bytes,
                     start + header_bytes)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _read_npy_header(f, version: tuple[int, int]):
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    return np.lib.format._read_array_header(f, version)  # 3.0 (utf-8 field names): no public reader


def read_member(path: str | Path, member: NpzMember) -> np.ndarray:
    """One array's values (a fresh array, dtype and order as stored); allocates `member.nbytes`."""
    path = Path(path)
    where = f"{path}: array '{member.name}'"
    buf = np.empty(member.nbytes, np.uint8)
    view = memoryview(buf)
    try:
        with zipfile.ZipFile(path) as zf, zf.open(member.member) as f:
            f.read(member.header_bytes)
            pos = 0
            while pos < member.nbytes:
                chunk = f.read(min(READ_CHUNK, member.nbytes - pos))
                if not chunk:
                    raise CorruptFileError(f"{where}: truncated ({pos} of {member.nbytes} bytes)")
                view[pos:pos + len(chunk)] = chunk
                pos += len(chunk)
            f.read(1)  # reach the member's end, so zipfile checks its CRC
    except (*ZIP_ERRORS, KeyError) as exc:
        raise CorruptFileError(f"{where}: cannot read ({exc})") from None
    return buf.view(member.dtype).reshape(member.shape, order="F" if member.fortran else "C")
