"""How one weight is quantized to 4 or 8 bits in blocks: the method and the statistics it uses.

Contract: `WeightMethod` names the method (`rtn`: round to nearest; `hqq`: HQQ-style optimised
scales, blockwise.refine, weighted by the input channels' mean square where known; `gptq`:
GPTQ-style error compensation, gptq.py, which needs X^T X and falls back to `hqq` without it),
symmetric or not, and holds per node the calibration statistics (`importance`: mean x_k^2 of the
node's input, [K]; `hessians`: X^T X / rows, [K, K]). `quantize_weight(w, bits, block_size,
method, hessian, importance)` quantizes one weight [K, N] (or a chunk of its columns: columns are
independent) and returns `blockwise.Quantized`; a caller streaming weights calls it per weight
(or chunk) with `method.statistics(node)`. `chunks(n, k)` gives the column ranges a weight is
quantized in, so that the work memory stays small whatever the weight's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxport.core.quantize.blockwise import Quantized, refine, rtn, to_blocks

METHODS = ("rtn", "hqq", "gptq")
CHUNK_VALUES = 1 << 22  # values of a weight quantized at once (16 MB of float32)


@dataclass
class WeightMethod:
    name: str = "hqq"
    symmetric: bool = False
    importance: dict[str, np.ndarray] = field(default_factory=dict)
    hessians: dict[str, np.ndarray] = field(default_factory=dict)

    def statistics(self, node: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(X^T X, mean x^2) of `node`'s input, each None when not collected."""
        hessian = self.hessians.get(node)
        importance = self.importance.get(node)
        if importance is None and hessian is not None:
            importance = np.diag(hessian).astype(np.float32)
        return hessian, importance

    def describe(self) -> str:
        kind = "symmetric" if self.symmetric else "asymmetric"
        if self.name == "gptq" and self.hessians:
            return f"GPTQ-style error compensation on calibration activations ({len(self.hessians)} weights), {kind}"
        if self.name in ("hqq", "gptq"):
            weighted = " weighted by the activations' channel power" if self.importance or self.hessians else ""
            return f"HQQ-style optimised scales{weighted}, {kind}"
        return f"round to nearest, {kind}"


def chunks(n: int, k: int) -> list[tuple[int, int]]:
    step = max(1, CHUNK_VALUES // max(k, 1))
    return [(start, min(start + step, n)) for start in range(0, n, step)]


def quantize_weight(w: np.ndarray, bits: int, block_size: int, method: WeightMethod,
                    hessian: np.ndarray | None = None, importance: np.ndarray | None = None) -> Quantized:
    """See the module docstring; `w` [K, N] float32 (a view is fine)."""
    k = w.shape[0]
    if method.name == "gptq" and hessian is not None:
        from onnxport.core.quantize.gptq import gptq

        return gptq(np.asarray(w, np.float32), hessian, bits, block_size, method.symmetric)
    blocks = to_blocks(w, block_size)
    start = rtn(blocks, bits, method.symmetric, k)
    if method.name == "rtn":
        return start
    if importance is None and hessian is not None:
        importance = np.diag(hessian).astype(np.float32)
    return refine(blocks, start, importance)
