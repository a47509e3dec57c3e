"""Block quantization of a weight to 4 or 8 bits: a scale (and a zero point) per block of values.

Why: weight-only models keep activations in float; the weights' rounding error is all their error,
so how each block's scale and zero point are chosen decides the accuracy.

Contract: `to_blocks(w, block_size)` lays a weight [K, N] out as MatMulNBits reads it: [N,
K/block_size, block_size], blocks along K (zero padded). `rtn(blocks, bits, symmetric)` rounds to
nearest from the block's range (asymmetric: min..max with 0 inside and an integer zero point;
symmetric: the largest magnitude maps to -2^(bits-1)). `refine(blocks, start, importance)`:
HQQ-style optimised scales (alternating least squares from several clipped ranges, integer zero
points), the error weighted per input channel by `importance` ([K], mean x_k^2; None: uniform);
no block's error grows over the start. `Quantized` holds the integers [N, blocks, block_size]
(uint8, zero point included), scales and zero points [N, blocks]; `dequantize()` -> [K, N].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHRINK = (1.0, 0.9, 0.8)  # range fractions tried as starting points by `refine`
REFINE_ROUNDS = 2


@dataclass
class Quantized:
    q: np.ndarray  # uint8 [N, blocks, block_size], in [0, 2^bits)
    scales: np.ndarray  # float32 [N, blocks]
    zero_points: np.ndarray  # uint8 [N, blocks] (2^(bits-1) everywhere when symmetric)
    bits: int
    k: int  # rows of the weight (K); blocks * block_size >= K
    symmetric: bool

    @property
    def block_size(self) -> int:
        return int(self.q.shape[2])

    def dequantize(self) -> np.ndarray:
        """The float32 weight [K, N] these integers stand for."""
        values = (self.q.astype(np.float32) - self.zero_points[..., None]) * self.scales[..., None]
        return np.ascontiguousarray(values.reshape(values.shape[0], -1)[:, : self.k].T)


def to_blocks(w: np.ndarray, block_size: int) -> np.ndarray:
    """[K, N] float -> [N, ceil(K / block_size), block_size] float32, zero padded along K."""
    k, n = w.shape
    blocks = -(-k // block_size)
    out = np.zeros((n, blocks * block_size), np.float32)
    out[:, :k] = w.T
    return out.reshape(n, blocks, block_size)


def rtn(blocks: np.ndarray, bits: int, symmetric: bool, k: int | None = None) -> Quantized:
    """Round to nearest; see the module docstring."""
    top = (1 << bits) - 1
    if symmetric:
        at = np.abs(blocks).argmax(axis=-1)[..., None]
        peak = np.take_along_axis(blocks, at, axis=-1)[..., 0]
        scales = peak / -(1 << (bits - 1))
        zero = np.full(scales.shape, 1 << (bits - 1), np.float32)
    else:
        low = np.minimum(blocks.min(axis=-1), 0.0)
        high = np.maximum(blocks.max(axis=-1), 0.0)
        scales = (high - low) / top
        zero = np.clip(np.rint(-low / np.where(scales == 0, 1.0, scales)), 0, top)
    scales = np.where(scales == 0, 1.0, scales).astype(np.float32)
    q = _round(blocks, scales, zero, top)
    return Quantized(q, scales, zero.astype(np.uint8), bits, blocks.shape[1] * blocks.shape[2] if k is None else k,
                     symmetric)


def _round(blocks: np.ndarray, scales: np.ndarray, zero: np.ndarray, top: int) -> np.ndarray:
    q = blocks / scales[..., None]
    q += zero[..., None]
    np.rint(q, out=q)
    np.clip(q, 0, top, out=q)
    return q.astype(np.uint8)


def block_weights(importance: np.ndarray | None, shape: tuple[int, int, int]) -> np.ndarray | None:
    """Per value weights [blocks, block_size] from per-input-channel importance [K] (None: uniform)."""
    if importance is None:
        return None
    _, blocks, size = shape
    padded = np.zeros(blocks * size, np.float32)
    padded[: len(importance)] = importance / max(float(np.mean(importance)), 1e-30)
    return padded.reshape(blocks, size)


def block_error(blocks: np.ndarray, q: np.ndarray, scales: np.ndarray, zero: np.ndarray,
                weights: np.ndarray | None) -> np.ndarray:
    """Weighted squared error per block [N, blocks]."""
    diff = (q.astype(np.float32) - zero[..., None]) * scales[..., None]
    diff -= blocks
    diff *= diff
    if weights is not None:
        diff *= weights
    return diff.sum(axis=-1)


def refine(blocks: np.ndarray, start: Quantized, importance: np.ndarray | None = None) -> Quantized:
    """HQQ-style optimised scales; see the module docstring."""
    top = (1 << start.bits) - 1
    weights = block_weights(importance, blocks.shape)
    best_q, best_s = start.q.copy(), start.scales.copy()
    best_z = start.zero_points.astype(np.float32)
    best_e = block_error(blocks, best_q, best_s, best_z, weights)
    for shrink in SHRINK:
        scales, zero = _shrunk(blocks, start, shrink, top)
        for _ in range(REFINE_ROUNDS):
            q = _round(blocks, scales, zero, top)
            err = block_error(blocks, q, scales, zero, weights)
            better = err < best_e
            np.copyto(best_q, q, where=better[..., None])
            np.copyto(best_s, scales, where=better, casting="unsafe")
            np.copyto(best_z, zero, where=better, casting="unsafe")
            np.minimum(err, best_e, out=best_e)
            scales, zero = _least_squares(blocks, q, weights, zero, start.symmetric, top)
    return Quantized(best_q, best_s.astype(np.float32), best_z.astype(np.uint8), start.bits, start.k,
                     start.symmetric)


def _shrunk(blocks: np.ndarray, start: Quantized, shrink: float, top: int) -> tuple[np.ndarray, np.ndarray]:
    """A starting scale and zero point covering `shrink` of the block's range (clipping its ends)."""
    if start.symmetric:
        return start.scales * shrink, start.zero_points.astype(np.float32)
    low = np.minimum(blocks.min(axis=-1), 0.0) * shrink
    high = np.maximum(blocks.max(axis=-1), 0.0) * shrink
    scales = (high - low) / top
    scales = np.where(scales == 0, 1.0, scales)
    return scales, np.clip(np.rint(-low / scales), 0, top)


def _least_squares(blocks: np.ndarray, q: np.ndarray, weights: np.ndarray | None, zero: np.ndarray,
                   symmetric: bool, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The scale (and integer zero point) that fit the rounded values `q` to `blocks` best in the
    weighted least-squares sense: w ~ s * q + m solved per block, then z = round(-m / s)."""
    w = np.ones(blocks.shape[1:], np.float32) if weights is None else weights
    qf = q.astype(np.float32)
    if symmetric:
        centred = qf - zero[..., None]
        num = (w * centred * blocks).sum(-1)
        den = (w * centred * centred).sum(-1)
        scales = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)
        return np.where(scales == 0, 1.0, scales), zero
    sw = w.sum(-1)
    sq, sx = (w * qf).sum(-1), (w * blocks).sum(-1)
    sqq, sqx = (w * qf * qf).sum(-1), (w * qf * blocks).sum(-1)
    det = sw * sqq - sq * sq
    ok = det > 1e-12
    det = np.where(ok, det, 1.0)
    scales = np.where(ok, (sw * sqx - sq * sx) / det, 1.0)
    offset = np.where(ok, (sqq * sx - sq * sqx) / det, 0.0)
    scales = np.where(scales > 0, scales, 1.0)
    return scales, np.clip(np.rint(-offset / scales), 0, top)
