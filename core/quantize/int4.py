"""Int4 weight-only quantization of the large MatMul weights (`com.microsoft.MatMulNBits`).

Why: a transformer's bytes are mostly a few MatMul weights; as 4-bit integers with a float scale
(and a 4-bit zero point) per block of `block_size` values along K they take ~0.16x their float32
bytes, ORT's CPU kernel multiplies by them directly, and activations stay float (no calibration).
Small weights (heads, gates) are left alone.

Contract: `int4(src, dst, *, exclude, block_size, min_elements, accuracy_level, big)` writes `dst`:
`src` with every MatMul whose second input is a 2-D float32 initializer of at least `min_elements`
values (and K >= block_size) replaced by MatMulNBits, except the nodes in `exclude`, in the main
graph and inside If/Loop/Scan bodies; unnamed MatMuls are named `MatMul#<index>`. Uses ORT's
`MatMulNBitsQuantizer` (asymmetric, QOperator, round-to-nearest). Returns the nodes quantized.
"""

from __future__ import annotations

import logging
from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import load_full
from onnxport.core.graph.uses import bodies
from onnxport.core.quantize.domains import declare_used_domains, drop_unused_domains
from onnxport.core.quantize.gain import all_graphs
from onnxport.core.util.errors import OnnxportError

BLOCK_SIZES = (16, 32, 64, 128, 256)
DEFAULT_BLOCK_SIZE = 32
MIN_ELEMENTS = 1 << 14  # 128 x 128: below this a weight's bytes are not worth the error
# MatMulNBits' compute type: 4 = int8 activations, blockwise (MLAS's fastest CPU kernel: 7x float32 at one
# token here, same cosine as float32 compute); 4-bit x int8 products cannot saturate int16 on AVX2.
ACCURACY_LEVEL = 4


def candidates(model: onnx.ModelProto, block_size: int, min_elements: int) -> list[str]:
    """Names of the MatMuls whose weight int4 would quantize, in every graph: ORT's quantizer walks
    If/Loop/Scan bodies and finds a weight in the body or any graph around it (unnamed MatMuls
    get a name here: `MatMul#<index>` in the main graph, `MatMul#<body path>#<index>` in a body)."""
    found: list[str] = []
    _graph_candidates(model.graph, {}, "", block_size, min_elements, found)
    return found


def _graph_candidates(graph: onnx.GraphProto, outer: dict, path: str, block_size: int, min_elements: int,
                      found: list[str]) -> None:
    inits = {**outer, **{t.name: t for t in graph.initializer}}
    for i, node in enumerate(graph.node):
        for attr, body in bodies(node):
            _graph_candidates(body, inits, f"{path}{node.name or node.op_type + str(i)}/{attr}#", block_size,
                              min_elements, found)
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        if not node.name:  # every MatMul named: those not chosen are excluded by name
            node.name = f"MatMul#{path}{i}"
        weight = inits.get(node.input[1])
        if weight is None or weight.data_type != onnx.TensorProto.FLOAT or len(weight.dims) != 2:
            continue
        k, n = weight.dims
        if k * n < min_elements or k < block_size:
            continue
        found.append(node.name)


def _quantizer_class():
    """ORT's module calls `logging.basicConfig(level=INFO)` when first imported, which would give the
    caller's program a root handler printing every INFO record: a handler present during the import
    makes that call a no-op, and is removed right after."""
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as exc:  # it needs onnx-ir, a dependency of onnxport since int4
        raise OnnxportError(f"int4 quantization needs ONNX Runtime's int4 quantizer, which cannot load: {exc}",
                            hint="pip install onnx-ir") from None
    finally:
        root.removeHandler(guard)
    return MatMulNBitsQuantizer


def int4(src: Path, dst: Path, *, exclude: list[str], block_size: int = DEFAULT_BLOCK_SIZE,
         min_elements: int = MIN_ELEMENTS, accuracy_level: int | None = ACCURACY_LEVEL, big: bool = False) -> list[str]:
    """See the module docstring."""
    if block_size not in BLOCK_SIZES:
        raise OnnxportError(f"int4 block size must be one of {', '.join(map(str, BLOCK_SIZES))}, got {block_size}")
    model = load_full(src)
    chosen = [n for n in candidates(model, block_size, min_elements) if n not in set(exclude)]
    others = [n.name for g in all_graphs(model) for n in g.node
              if n.op_type == "MatMul" and n.name and n.name not in chosen]
    quantizer = _quantizer_class()(model, bits=4, block_size=block_size, is_symmetric=False,
                                     accuracy_level=accuracy_level, nodes_to_exclude=others,
                                     op_types_to_quantize=("MatMul",))
    quantizer.process()
    result = quantizer.model.model
    drop_unused_domains(result)
    declare_used_domains(result)
    if big:
        onnx.save_model(result, str(dst), save_as_external_data=True, location=dst.name + ".data")
    else:
        onnx.save_model(result, str(dst))
    return chosen
