"""Refuse a `torch.export` `.pt2` archive that would make torch unpickle anything, before torch opens it.

Contract: `check_pt2_archive(path, torch)` returns None for an archive whose every member is JSON,
raw tensor bytes or weights-only sample inputs, and raises `OnnxportError` (one line naming the
member) for anything else, trusted program or not: onnxport never unpickles.
Why: `torch.export.load` (torch 2.13) unpickles opaque/custom objects (chosen by the config's
`path_name` prefix, wherever the payload sits), entries with `use_pickle`, legacy `.pt` weights and
constants and the pre-2.7 layout (a weights-only load retried without it), sample inputs (the same
retry), and loads AOTInductor native code. So every config entry and member is inspected:
`use_pickle` and custom/opaque components in config paths; member paths (custom/opaque components,
`data/aotinductor/`, pickle-file names outside the sample inputs, the old layout); member bytes (a
pickle stream or a nested torch.save zip; raw tensor payloads only when they parse as a whole
pickle). Sample inputs are loaded here with `weights_only=True`, so torch's own first attempt
succeeds and its unsafe retry never runs. Members are read through `archive_bounds.open_zip`, their
declared sizes bounded first."""

from __future__ import annotations

import io
import json
import pickletools
import zipfile
from pathlib import Path

from onnxport.core.io.archive_bounds import ZIP_ERRORS, open_zip
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import first_line

OBJECT_PREFIXES = ("opaque_obj_", "custom_obj_")
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt")
OLD_LAYOUT = ("serialized_",)  # torch < 2.7 archives: serialized_state_dict.pt, ...
SAMPLE_INPUTS = "data/sample_inputs/"
PAYLOAD_DIRS = ("data/weights/", "data/constants/")
MAX_CONFIG_BYTES = 64 << 20
PICKLE_SCAN_BYTES = 1 << 20
PICKLE_PROTOCOL = b"\x80"
ZIP_MAGIC = b"PK\x03\x04"


def check_pt2_archive(path: Path, torch) -> None:
    """Raise `OnnxportError` unless loading `path` with torch.export.load unpickles nothing."""
    try:
        with open_zip(path, ".pt2 archive") as zf:  # members' declared sizes bounded (archive_bounds)
            infos = zf.infolist()
            raw = _raw_payloads(zf, infos, path)
            for info in infos:
                _check_member(zf, info, raw, path, torch)
    except ZIP_ERRORS as exc:  # a corrupt member, a name that is not UTF-8...
        raise OnnxportError(f"{path}: not a readable .pt2 archive ({exc})") from None


def _parts(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p]


def _relative(name: str) -> str:
    """The member's path below the archive's root folder (torch reads every record under it)."""
    return "/".join(_parts(name)[1:])


def _pickled(path: Path, what: str) -> OnnxportError:
    return OnnxportError(f"{path}: holds pickled Python objects ({what}); onnxport never unpickles a .pt2 "
                         "(re-export the program without opaque/script object constants or tensor subclasses)")


def _raw_payloads(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], path: Path) -> set[str]:
    """Member names that configs declare as raw tensor bytes; refuse entries torch would unpickle."""
    raw: set[str] = set()
    for info in infos:
        if not info.filename.endswith("_config.json"):
            continue
        if info.file_size > MAX_CONFIG_BYTES:
            raise OnnxportError(f"{path}: {info.filename} is {info.file_size} bytes, too large for a payload config")
        try:
            config = json.loads(zf.read(info))
            entries = config["config"].items()
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise OnnxportError(f"{path}: {info.filename} is not a readable payload config") from None
        folder = info.filename.rsplit("/", 1)[0] if "/" in info.filename else ""
        for key, entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("path_name"), str):
                raise OnnxportError(f"{path}: {info.filename}: entry '{key}' is not a payload description")
            name = entry["path_name"]
            if entry.get("use_pickle") or any(p.startswith(OBJECT_PREFIXES) for p in _parts(name)):
                raise _pickled(path, f"'{key}' -> {name}")
            raw.add(f"{folder}/{name}" if folder else name)
    return raw


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, raw: set[str], path: Path, torch) -> None:
    name = info.filename
    parts = _parts(name)
    relative = _relative(name)
    if any(p.startswith(OBJECT_PREFIXES) for p in parts):
        raise _pickled(path, name)
    if "data/aotinductor/" in f"{relative}/" or "/data/aotinductor/" in f"/{name}/":
        raise OnnxportError(f"{path}: is an AOTInductor package (compiled native code); "
                            "save the program with torch.export.save instead")
    base = parts[-1] if parts else name
    sample = relative.startswith(SAMPLE_INPUTS)
    if base.startswith(OLD_LAYOUT) or name == "version":
        raise OnnxportError(f"{path}: an archive of the pre-2.7 torch.export format ({name}), which torch reads "
                            "by unpickling; save the program again with torch.export.save")
    if name.endswith("/"):  # a folder (ZipInfo.is_dir() fails on an empty name)
        return
    if base.lower().endswith(PICKLE_SUFFIXES) and not sample:
        raise _pickled(path, name)
    with zf.open(info) as f:
        head = f.read(len(ZIP_MAGIC))
    if name in raw:
        if head.startswith(PICKLE_PROTOCOL) and _is_pickle_stream(zf, info):
            raise _pickled(path, name)
    elif sample:
        _check_sample_inputs(zf, info, path, torch)
    elif head.startswith(PICKLE_PROTOCOL) or head.startswith(ZIP_MAGIC):
        raise _pickled(path, name)


def _is_pickle_stream(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Does the member begin with a complete pickle (opcodes up to STOP)? Random tensor bytes do not."""
    with zf.open(info) as f:
        data = f.read(PICKLE_SCAN_BYTES)
    try:
        for opcode, _arg, _pos in pickletools.genops(io.BytesIO(data)):
            if opcode.name == "STOP":
                return True
    except Exception:  # genops raises ValueError mostly, anything on garbage arguments
        return False
    return False


def _check_sample_inputs(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, torch) -> None:
    try:
        torch.load(io.BytesIO(zf.read(info)), weights_only=True, map_location="cpu")
    except Exception as exc:  # UnpicklingError for foreign objects; RuntimeError/ValueError for garbage
        first = first_line(exc, 200)
        raise OnnxportError(f"{path}: its sample inputs ({info.filename}) are not plain tensors; onnxport never "
                            f"unpickles a .pt2 ({first})") from None
