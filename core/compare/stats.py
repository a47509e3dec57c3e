"""How far apart two tensors are, measured piece by piece, and when that is beyond tolerance.

Contract: `diff_stats(a, b, shape_a, shape_b)` takes two flat sliceable sequences (numpy arrays,
`weights._FileValues`) and folds them in `PIECE` elements at a time (float64 sums: memory is one
piece, whatever the tensors' size) into `DiffStats`: max abs difference, cosine, relative L2 of
the difference (to `a`, the reference), the reference's max abs, and the non-finite values that
differ. Non-finite values never read as equal: a NaN or an infinity counts as a difference unless
both tensors hold the very same bytes there. `Tolerance.departs(stats)`: a different shape, a
non-finite difference, max abs over `atol + rtol * max|a|`, or cosine under `min_cosine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PIECE = 1 << 20  # elements per step: 8 MB per float64 copy


@dataclass(frozen=True)
class Tolerance:
    atol: float = 1e-6
    rtol: float = 1e-5
    min_cosine: float | None = None

    def bound(self, reference_max_abs: float) -> float:
        return self.atol + self.rtol * reference_max_abs

    def departs(self, s: DiffStats) -> bool:
        if s.shape_differs or s.nonfinite or not math.isfinite(s.max_abs):
            return True
        if s.max_abs > self.bound(s.ref_max_abs):
            return True
        return self.min_cosine is not None and s.cosine < self.min_cosine

    def to_dict(self) -> dict:
        return {"atol": self.atol, "rtol": self.rtol, "min_cosine": self.min_cosine}

    def describe(self) -> str:
        cos = f", cosine >= {self.min_cosine:g}" if self.min_cosine is not None else ""
        return f"max abs <= {self.atol:g} + {self.rtol:g} x max|A|{cos}"


DEFAULT_TOLERANCE = Tolerance()


@dataclass
class DiffStats:
    count: int = 0
    max_abs: float = 0.0
    cosine: float = 1.0
    rel_l2: float = 0.0
    ref_max_abs: float = 0.0
    nonfinite: int = 0
    shape_a: tuple[int, ...] | None = None
    shape_b: tuple[int, ...] | None = None
    identical: bool = True

    @property
    def shape_differs(self) -> bool:
        return self.shape_a is not None and self.shape_b is not None and tuple(self.shape_a) != tuple(self.shape_b)

    def to_dict(self) -> dict:
        out = {"max_abs": _num(self.max_abs), "cosine": _num(self.cosine), "rel_l2": _num(self.rel_l2),
               "reference_max_abs": _num(self.ref_max_abs), "nonfinite": self.nonfinite}
        if self.shape_differs:
            out["shape_a"], out["shape_b"] = list(self.shape_a), list(self.shape_b)
        return out


def _num(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def shape_mismatch(shape_a, shape_b) -> DiffStats:
    return DiffStats(max_abs=math.inf, cosine=0.0, rel_l2=math.inf, shape_a=tuple(shape_a), shape_b=tuple(shape_b),
                     identical=False)


def diff_stats(a, b, shape_a=None, shape_b=None) -> DiffStats:
    """See the module docstring."""
    acc = Accumulator()
    acc.add(a, b, shape_a, shape_b)
    return acc.stats()


class Accumulator:
    """Statistics over several pairs of tensors (the batches of one output), piece by piece."""

    def __init__(self) -> None:
        self.sums = _Sums()
        self.count = 0
        self.shapes: tuple | None = None
        self.mismatch: DiffStats | None = None

    def add(self, a, b, shape_a=None, shape_b=None) -> None:
        shape_a = tuple(shape_a) if shape_a is not None else (len(a),)
        shape_b = tuple(shape_b) if shape_b is not None else (len(b),)
        if self.shapes is None:
            self.shapes = (shape_a, shape_b)
        if shape_a != shape_b or len(a) != len(b):
            self.mismatch = self.mismatch or shape_mismatch(shape_a, shape_b)
            return
        for start in range(0, len(a), PIECE):
            self.sums.add(np.asarray(a[start:start + PIECE]), np.asarray(b[start:start + PIECE]))
        self.count += len(a)

    def stats(self) -> DiffStats:
        if self.mismatch is not None:
            return self.mismatch
        shape_a, shape_b = self.shapes or (None, None)
        return self.sums.stats(self.count, shape_a, shape_b)


class _Sums:
    def __init__(self) -> None:
        self.dot = self.aa = self.bb = self.dd = 0.0
        self.max_abs = self.ref_max = 0.0
        self.nonfinite = 0
        self.identical = True
        self.strings_differ = False

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        same_bytes = a.dtype == b.dtype and (a.dtype == object or np.array_equal(_bits(a), _bits(b)))
        self.identical &= bool(same_bytes)
        if a.dtype == object or b.dtype == object:
            self.strings_differ |= not same_bytes
            return
        x, y = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
        bad = ~(np.isfinite(x) & np.isfinite(y))
        if bad.any():
            if a.dtype == b.dtype:
                bad &= _bits(a) != _bits(b)
            self.nonfinite += int(bad.sum())
            ok = np.isfinite(x) & np.isfinite(y)
            x, y = x[ok], y[ok]
        if not x.size:
            return
        d = x - y
        self.max_abs = max(self.max_abs, float(np.abs(d).max()))
        self.ref_max = max(self.ref_max, float(np.abs(x).max()))
        self.dot += float(np.einsum("i,i->", x, y))  # numpy's own loop: BLAS threads fight ORT's
        self.aa += float(np.einsum("i,i->", x, x))
        self.bb += float(np.einsum("i,i->", y, y))
        self.dd += float(np.einsum("i,i->", d, d))

    def stats(self, count: int, shape_a, shape_b) -> DiffStats:
        if self.strings_differ:
            return DiffStats(count, math.inf, 0.0, math.inf, 0.0, 0, shape_a, shape_b, False)
        if self.aa == 0.0 and self.bb == 0.0:
            cosine = 1.0
        elif self.aa == 0.0 or self.bb == 0.0:
            cosine = 0.0
        else:
            cosine = max(-1.0, min(1.0, self.dot / math.sqrt(self.aa * self.bb)))
        rel = math.sqrt(self.dd / self.aa) if self.aa else (0.0 if self.dd == 0.0 else math.inf)
        return DiffStats(count, self.max_abs, cosine, rel, self.ref_max, self.nonfinite,
                         None if shape_a is None else tuple(shape_a), None if shape_b is None else tuple(shape_b),
                         self.identical)


def _bits(a: np.ndarray) -> np.ndarray:
    """`a`'s elements as unsigned integers of the same width (NaN payloads compare as bytes)."""
    if a.dtype.kind == "f" and a.dtype.itemsize in (2, 4, 8):
        return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
    return a
