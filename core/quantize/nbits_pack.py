"""The bytes ONNX Runtime's block-quantized contrib ops read (`com.microsoft` domain).

Contract:
- `matmul_tensors(qz)` -> (B, scales, zero points) of `MatMulNBits` for a weight [K, N]: B uint8
  [N, blocks, block_size * bits / 8], values along K, two 4-bit values a byte, low nibble first;
  scales float32 [N * blocks]; zero points uint8 [N * ceil(blocks * bits / 8)] (packed the same
  way, per column), or None when symmetric (the op's default is 2^(bits-1)).
- `gather_tensors(qz)` -> (data, scales, zero points) of `GatherBlockQuantized` for an embedding
  table [V, D] quantized along D (`qz` made from its transpose: blocks run along D): data uint8
  [V, D * bits / 8], scales float32 [V, blocks], zero points uint8 [V, ceil(blocks * bits / 8)].
- `matmul_node` / `gather_node`: the nodes reading them.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, helper

from onnxport.core.quantize.blockwise import Quantized

DOMAIN = "com.microsoft"


def pack_last(values: np.ndarray, bits: int) -> np.ndarray:
    """uint8 values < 2^bits packed along the last axis (4 bits: pairs, low nibble first; 8: as is)."""
    if bits == 8:
        return np.ascontiguousarray(values, dtype=np.uint8)
    if values.shape[-1] % 2:
        values = np.concatenate([values, np.zeros(values.shape[:-1] + (1,), np.uint8)], axis=-1)
    return np.ascontiguousarray(values[..., 0::2] | (values[..., 1::2] << 4), dtype=np.uint8)


def matmul_tensors(qz: Quantized) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    data = pack_last(qz.q, qz.bits)
    scales = np.ascontiguousarray(qz.scales.reshape(-1), dtype=np.float32)
    zero = None if qz.symmetric else pack_last(qz.zero_points, qz.bits).reshape(-1)
    return data, scales, zero


def gather_tensors(qz: Quantized, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """`width`: D, the embedding's row length (the blocks' padding left out)."""
    rows = qz.q.reshape(qz.q.shape[0], -1)[:, :width]
    data = pack_last(rows, qz.bits)
    zero = None if qz.symmetric else pack_last(qz.zero_points, qz.bits)
    return data, np.ascontiguousarray(qz.scales, dtype=np.float32), zero


def matmul_node(node: NodeProto, names: list[str], k: int, n: int, bits: int, block_size: int,
                accuracy_level: int) -> NodeProto:
    """`names`: the packed weight, scales and (asymmetric) zero points."""
    return helper.make_node("MatMulNBits", [node.input[0], *names], list(node.output), name=node.name,
                            domain=DOMAIN, K=k, N=n, bits=bits, block_size=block_size,
                            accuracy_level=accuracy_level)


def gather_node(node: NodeProto, names: list[str], bits: int, block_size: int) -> NodeProto:
    """`names`: data, scales and (asymmetric) zero points; the indices stay the Gather's."""
    inputs = [names[0], node.input[1], *names[1:]]
    return helper.make_node("GatherBlockQuantized", inputs, list(node.output), name=node.name, domain=DOMAIN,
                            gather_axis=0, quantize_axis=1, block_size=block_size, bits=bits)
