"""Which int8 kernel ONNX Runtime will use on this CPU, and the weight format that keeps it exact.

Why: ORT multiplies uint8 activations by int8 weights. On x86 without VNNI (AVX2, AVX-512 BW
alone) its kernels add pairs of u8 x s8 products into a *saturating* int16, so 8-bit weights can
clip; 7-bit weights (`reduce_range`) keep every pair sum within int16: exact on every CPU. VNNI,
AMX and ARM's dot product accumulate in int32, so 8-bit weights are exact and more accurate there.

Contract: `detect()` reads the CPU's flags (Linux `/proc/cpuinfo`, macOS `sysctl`; anything else
-> `unknown`, treated as saturating) and returns an `Int8Path`; `resolve(value)` returns the path
a caller pinned by name (tests pin one so their verdict never depends on the CPU) or the detected
one. `Int8Path.reduce_range` is the weight choice; `describe()` is the report's line ("int8 path:
avx2 (no VNNI) -> 7-bit weights").
"""

from __future__ import annotations

import functools
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from onnxport.core.util.errors import OnnxportError


@dataclass(frozen=True)
class Int8Path:
    name: str
    label: str  # for people: "avx2 (no VNNI)"
    saturates: bool  # u8s8 with 8-bit weights can clip (vpmaddubsw), or we cannot tell
    fast: bool  # int8 kernels expected faster than float32 here
    source: str = "detected"  # "detected" | "pinned"

    @property
    def reduce_range(self) -> bool:
        """7-bit weights: the only weight format exact on this path (and on every other)."""
        return self.saturates

    @property
    def weight_bits(self) -> int:
        return 7 if self.reduce_range else 8

    def describe(self, reduce_range: bool | None = None) -> str:
        """The report's line; `reduce_range` the caller forced, if any."""
        rr = self.reduce_range if reduce_range is None else reduce_range
        text = f"int8 path: {self.label} -> {7 if rr else 8}-bit weights"
        if reduce_range is not None and reduce_range != self.reduce_range:
            text += " (as asked" + ("; u8s8 can saturate on this path)" if self.saturates and not rr else ")")
        if self.source == "pinned":
            text += ", pinned"
        if not self.fast:
            text += "; int8 may not be faster than float32 on this CPU"
        return text

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "saturates": self.saturates, "fast": self.fast,
                "source": self.source, "weight_bits": self.weight_bits}


PATHS: dict[str, Int8Path] = {p.name: p for p in (
    Int8Path("amx", "AMX", saturates=False, fast=True),
    Int8Path("avx512-vnni", "AVX-512 VNNI", saturates=False, fast=True),
    Int8Path("avx-vnni", "AVX-VNNI", saturates=False, fast=True),
    Int8Path("avx512bw", "AVX-512 BW (no VNNI)", saturates=True, fast=True),
    Int8Path("avx2", "avx2 (no VNNI)", saturates=True, fast=True),
    Int8Path("x86", "x86 without AVX2", saturates=True, fast=False),  # SSSE3's pmaddubsw saturates alike
    Int8Path("arm-dotprod", "ARM dot product (sdot/udot)", saturates=False, fast=True),
    Int8Path("arm", "ARM without dot product", saturates=False, fast=False),
    Int8Path("unknown", "unknown CPU (7-bit weights are exact everywhere)", saturates=True, fast=True),
)}
ALIASES = {"vnni": "avx512-vnni", "portable": "unknown", "conservative": "unknown", "neon": "arm"}


def from_flags(flags: set[str], machine: str) -> Int8Path:
    """The path for a set of CPU feature flags (Linux `/proc/cpuinfo` spelling) on `machine`."""
    machine = machine.lower()
    if machine in ("aarch64", "arm64") or machine.startswith("arm"):
        return PATHS["arm-dotprod" if flags & {"asimddp", "dotprod"} else "arm"]
    if machine not in ("x86_64", "amd64", "i686", "i386", "x86"):
        return PATHS["unknown"]
    if "amx_int8" in flags and "amx_tile" in flags:
        return PATHS["amx"]
    if "avx512_vnni" in flags and "avx512bw" in flags:
        return PATHS["avx512-vnni"]
    if "avx_vnni" in flags:
        return PATHS["avx-vnni"]
    if "avx512bw" in flags:
        return PATHS["avx512bw"]
    if "avx2" in flags:
        return PATHS["avx2"]
    return PATHS["x86"] if flags else PATHS["unknown"]


def parse_cpuinfo(text: str) -> set[str]:
    """Flags of the first processor in `/proc/cpuinfo` text (x86 `flags`, ARM `Features`)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


_MAC_FLAGS = {  # sysctl name -> the Linux flag it stands for
    "hw.optional.arm.FEAT_DotProd": "asimddp", "hw.optional.avx512vnni": "avx512_vnni",
    "hw.optional.avx512bw": "avx512bw", "hw.optional.avx2_0": "avx2",
}


def _mac_flags() -> set[str]:
    """The flags macOS's `sysctlbyname` reports set (read in this process: no `sysctl` child)."""
    import ctypes  # here: only macOS reads flags this way

    try:
        sysctlbyname = ctypes.CDLL(None).sysctlbyname
    except (OSError, AttributeError):  # not macOS's libc
        return set()
    flags = set()
    for key, flag in _MAC_FLAGS.items():
        value, size = ctypes.c_int64(0), ctypes.c_size_t(8)  # these are 4-byte ints; the rest stays 0
        if sysctlbyname(key.encode(), ctypes.byref(value), ctypes.byref(size), None, 0) == 0 and value.value == 1:
            flags.add(flag)
    return flags


@functools.lru_cache(maxsize=1)
def detect() -> Int8Path:
    """See the module docstring. The CPU does not change while a process runs, so this is read once."""
    machine = platform.machine()
    try:
        if sys.platform.startswith("linux"):
            return from_flags(parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace")), machine)
        if sys.platform == "darwin":
            return from_flags(_mac_flags(), machine)
    except OSError:
        pass
    return PATHS["unknown"]


def resolve(value: str | Int8Path | None) -> Int8Path:
    """A pinned path (by name, see PATHS and ALIASES) or, for None / "auto", the detected one."""
    if isinstance(value, Int8Path):
        return value
    if value is None or value == "auto":
        return detect()
    name = ALIASES.get(value.lower(), value.lower())
    if name not in PATHS:
        raise OnnxportError(f"unknown int8 path '{value}'; choose one of auto, "
                            + ", ".join(sorted(set(PATHS) | set(ALIASES))))
    return Int8Path(**{**PATHS[name].__dict__, "source": "pinned"})
