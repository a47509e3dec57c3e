"""GPTQ-style quantization of a weight: each column's rounding error compensated in the ones after.

Why: rounding each weight to its nearest level ignores that the layer's inputs are correlated;
GPTQ (Frantar et al., 2022) quantizes the input channels one at a time and moves each one's error
onto the channels not yet quantized, weighted by the inverse of the inputs' Hessian X^T X, which
minimises the error of the layer's *output* on the calibration activations instead of the weights'.

Contract: `gptq(w, hessian, bits, block_size, symmetric)` -> `blockwise.Quantized` for a weight
[K, N] (columns of N independent: a chunk of them is fine) with `hessian` [K, K] of its input;
each block's scale and zero point are chosen (blockwise.rtn, then refined with the Hessian's
diagonal as importance) when the quantization reaches the block, from the weights as updated so
far. Dampening `DAMP` x the mean diagonal keeps the Hessian invertible; input channels that never
vary (zero diagonal) are quantized as they are.
"""

from __future__ import annotations

import numpy as np

from onnxport.core.quantize.blockwise import Quantized, refine, rtn

DAMP = 0.01
LAZY = 128  # columns updated together before the rest of the weight is (a multiple of the block size)


def inverse_factor(hessian: np.ndarray, k: int) -> np.ndarray:
    """The upper Cholesky factor of H^-1 (dampened, dead channels made independent), [K, K] float64."""
    h = np.array(hessian, np.float64)[:k, :k]
    dead = np.diag(h) <= 0
    h[dead, :] = 0.0
    h[:, dead] = 0.0
    h[dead, dead] = 1.0
    h[np.diag_indices(k)] += DAMP * float(np.mean(np.diag(h)))
    lower = np.linalg.cholesky(h)
    inv = np.linalg.inv(lower)
    inverse = inv.T @ inv
    return np.linalg.cholesky(inverse).T


def gptq(w: np.ndarray, hessian: np.ndarray, bits: int, block_size: int, symmetric: bool) -> Quantized:
    """See the module docstring."""
    k, n = w.shape
    blocks = -(-k // block_size)
    padded = blocks * block_size
    work = np.zeros((n, padded), np.float64)
    work[:, :k] = w.T
    u = np.eye(padded)
    u[:k, :k] = inverse_factor(hessian, k)
    importance = np.zeros(padded, np.float32)
    importance[:k] = np.clip(np.diag(hessian)[:k], 0, None)
    top = (1 << bits) - 1
    q = np.zeros((n, blocks, block_size), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    zero = np.zeros((n, blocks), np.uint8)
    lazy = max(LAZY // block_size, 1) * block_size
    for i1 in range(0, padded, lazy):
        i2 = min(i1 + lazy, padded)
        part = work[:, i1:i2].copy()
        errors = np.zeros_like(part)
        for b in range(i1 // block_size, i2 // block_size):
            at = b * block_size - i1
            chunk = part[:, at:at + block_size].astype(np.float32)[:, None, :]
            start = rtn(chunk, bits, symmetric, block_size)
            chosen = refine(chunk, start, importance[b * block_size:(b + 1) * block_size])
            scales[:, b], zero[:, b] = chosen.scales[:, 0], chosen.zero_points[:, 0]
            s, z = chosen.scales[:, 0].astype(np.float64), chosen.zero_points[:, 0].astype(np.float64)
            for j in range(at, at + block_size):
                level = np.clip(np.rint(part[:, j] / s + z), 0, top)
                q[:, b, j - at] = level
                err = (part[:, j] - (level - z) * s) / u[i1 + j, i1 + j]
                part[:, j:] -= np.outer(err, u[i1 + j, i1 + j:i2])
                errors[:, j] = err
        work[:, i2:] -= errors @ u[i1:i2, i2:]
    return Quantized(q, scales, zero, bits, k, symmetric)
