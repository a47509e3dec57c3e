"""Crafted hostile PyTorch sources: each leaves a marker file behind if its code ever runs.

- `Marker(path)`: a pickled object whose unpickling creates `path` (`open(path, "w")`, no shell).
- `marker_pickle(path, protocol)`: its pickle bytes (protocol 0 has no 0x80 opcode in front).
- `load_marker_torchscript(path, marker)`: TorchScript whose `__setstate__` (run by torch.jit.load)
  creates `marker` with torch.from_file; `forward_marker_torchscript`: whose forward does.
- `rewrite_pt2(src, dst, edit)`: copy a .pt2 archive member by member through `edit(name, data)`
  (return the new bytes) and append `extra` members; names are below the archive's root folder.
"""

from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch


class Marker:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def marker_pickle(path: Path, protocol: int = 2) -> bytes:
    return pickle.dumps(Marker(path), protocol=protocol)


class _LoadMarker(torch.nn.Module):
    def __init__(self, marker: str) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(2, 4))
        self.marker = marker

    def forward(self, x):
        return x @ self.weight.t()

    @torch.jit.export
    def __getstate__(self) -> tuple[str, bool, torch.Tensor]:
        return (self.marker, self.training, self.weight)

    @torch.jit.export
    def __setstate__(self, state: tuple[str, bool, torch.Tensor]) -> None:
        self.marker = state[0]
        self.training = state[1]
        self.weight = state[2]
        self.weight.data.add_(torch.from_file(self.marker, shared=True, size=4).sum() * 0)


class _ForwardMarker(torch.nn.Module):
    def __init__(self, marker: str) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)
        self.marker = marker

    def forward(self, x):
        return self.lin(x) + torch.from_file(self.marker, shared=True, size=4).sum() * 0


def load_marker_torchscript(path: Path, marker: Path) -> Path:
    torch.jit.script(_LoadMarker(str(marker))).save(str(path))
    return path


def forward_marker_torchscript(path: Path, marker: Path) -> Path:
    torch.jit.script(_ForwardMarker(str(marker))).save(str(path))
    return path


def rewrite_pt2(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None] | None = None,
                extra: dict[str, bytes] | None = None) -> Path:
    """Copy `src` to `dst`; `edit(relative_name, data)` may return new bytes (None: drop the member)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        root = zin.namelist()[0].split("/")[0]
        for info in zin.infolist():
            relative = info.filename.split("/", 1)[1]
            data = zin.read(info)
            data = edit(relative, data) if edit else data
            if data is not None:
                zout.writestr(info.filename, data)
        for relative, data in (extra or {}).items():
            zout.writestr(relative if relative == "version" else f"{root}/{relative}", data)
    return dst


def add_config_entry(kind: str, key: str, entry: dict) -> Callable[[str, bytes], bytes]:
    """An `edit` adding `entry` to the archive's weights or constants config (`kind`)."""
    def edit(relative: str, data: bytes) -> bytes:
        if relative == f"data/{kind}/model_{kind}_config.json":
            config = json.loads(data)
            config["config"][key] = entry
            return json.dumps(config).encode()
        return data

    return edit
