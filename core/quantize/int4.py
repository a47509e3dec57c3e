"""Weight-only 4/8-bit quantization (`com.microsoft.MatMulNBits`, `GatherBlockQuantized`), streamed.

Why: a transformer's bytes are mostly a few MatMul weights and an embedding table; as 4-bit
integers with a float scale and a 4-bit zero point per block of `block_size` values they take
~0.16x their float32 bytes (8-bit: ~0.28x), ONNX Runtime's CPU kernels read them directly, and
activations stay float (no calibration needed). Each weight is read, quantized and written one
at a time, from the source file to the written one (core/export/writer.py): a model larger than
memory quantizes in the memory of its biggest weight.

Contract: `write_weight_only(src, dst, plan, big)` writes `dst` (`big`: with external data): `src`
with each node of `plan.bits` (a `nbits_plan.weight_uses` candidate) reading its weight in that
many bits, in the main graph and in If/Loop/Scan bodies; a float weight nothing else reads is
dropped. `int4(src, dst, exclude=..., ...)` quantizes every candidate but `exclude` to 4 bits and
returns their names. Weights are quantized by `weights.quantize_weight` (plan.method).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.export.writer import write_model
from onnxport.core.graph.const_tensors import ConstTensor, from_initializer
from onnxport.core.graph.uses import used_names
from onnxport.core.io.model_io import copy_without_initializers, load_graph
from onnxport.core.quantize import nbits_pack
from onnxport.core.quantize.cpu_int8 import detect
from onnxport.core.quantize.domains import declare_used_domains, drop_unused_domains
from onnxport.core.quantize.gain import all_graphs
from onnxport.core.quantize.nbits_plan import GATHER, MATMUL, WeightUse, weight_uses
from onnxport.core.quantize.weights import WeightMethod, chunks, quantize_weight
from onnxport.core.util.errors import OnnxportError

__all__ = ["WEIGHT_OPS", "NbitsPlan", "candidates", "int4", "weight_uses", "write_weight_only"]

BLOCK_SIZES = (16, 32, 64, 128, 256)
DEFAULT_BLOCK_SIZE = 32
MIN_ELEMENTS = 1 << 14  # 128 x 128: below this a weight's bytes are not worth the error
WEIGHT_OPS = (MATMUL, GATHER)
# MatMulNBits' compute type per weight bits: 4 = int8 activations in blocks (MLAS's int8 kernels, for
# 4- and 8-bit weights; 4-bit x int8 pairs cannot saturate int16 on AVX2), 0 = float (CPUs without
# fast int8: MLAS's float kernels)
ACCURACY_LEVEL = {4: 4, 8: 4}
FLOAT_COMPUTE = {4: 0, 8: 0}


def accuracy_levels() -> dict[int, int]:
    """MatMulNBits' accuracy_level per weight width for the CPU this runs on (cpu_int8.detect)."""
    return dict(ACCURACY_LEVEL if detect().fast else FLOAT_COMPUTE)


@dataclass
class NbitsPlan:
    """What to write: bits per candidate node, the blocks, the method and its statistics."""

    bits: dict[str, int]
    block_size: int = DEFAULT_BLOCK_SIZE
    method: WeightMethod = field(default_factory=WeightMethod)
    accuracy_level: dict[int, int] = field(default_factory=accuracy_levels)
    min_elements: int = MIN_ELEMENTS
    cache: dict | None = None  # (weight, op, bits) -> its tensors, kept across a search's attempts


def check_block_size(block_size: int) -> None:
    if block_size not in BLOCK_SIZES:
        raise OnnxportError(f"int4 block size must be one of {', '.join(map(str, BLOCK_SIZES))}, got {block_size}")


def candidates(model: onnx.ModelProto, block_size: int, min_elements: int = MIN_ELEMENTS,
               ops: tuple[str, ...] = (MATMUL,)) -> list[str]:
    """Names of the nodes whose weights could be stored in 4 bits (see nbits_plan.py), in graph order."""
    return list(dict.fromkeys(u.node for u in weight_uses(model, block_size, min_elements) if u.op in ops))


def int4(src: Path, dst: Path, *, exclude: list[str], block_size: int = DEFAULT_BLOCK_SIZE,
         min_elements: int = MIN_ELEMENTS, big: bool = False, method: WeightMethod | None = None) -> list[str]:
    """Every MatMul candidate but `exclude` in 4 bits; returns their names."""
    check_block_size(block_size)
    src = Path(src)
    chosen = [n for n in candidates(load_graph(src), block_size, min_elements) if n not in set(exclude)]
    write_weight_only(src, dst, NbitsPlan({n: 4 for n in chosen}, block_size, method or WeightMethod(),
                                          min_elements=min_elements), big)
    return chosen


def write_weight_only(src: Path, dst: Path, plan: NbitsPlan, big: bool) -> None:
    """See the module docstring."""
    check_block_size(plan.block_size)
    src = Path(src)
    model = load_graph(src)
    uses = [u for u in weight_uses(model, plan.block_size, plan.min_elements) if plan.bits.get(u.node) in (4, 8)]
    skeleton = copy_without_initializers(model)
    graphs = list(all_graphs(skeleton))
    source = {t.name: t for t in model.graph.initializer}
    consts = {t.name: from_initializer(t, src.parent) for t in model.graph.initializer}
    made: dict[tuple[str, int], list[str]] = {}
    for use in uses:
        key = (use.weight, plan.bits[use.node])
        if key not in made:
            made[key] = _add_weight(use, key[1], plan, graphs, consts, source)
        _replace_node(graphs[use.graph], use, made[key], key[1], plan)
    _drop_unread(graphs, consts)
    drop_unused_domains(skeleton)
    declare_used_domains(skeleton)
    write_model(skeleton, list(consts.values()), dst, external_data=big)


def _add_weight(use: WeightUse, bits: int, plan: NbitsPlan, graphs: list[onnx.GraphProto],
                consts: dict[str, ConstTensor], source: dict[str, onnx.TensorProto]) -> list[str]:
    """The quantized tensors of `use`'s weight: streamed constants of the main graph (computed when
    written), or initializers of the body that holds the float weight. Returns their names."""
    stem = f"{use.weight}_q{bits}b{plan.block_size}"
    names = [f"{stem}", f"{stem}_scales"] + ([] if plan.method.symmetric else [f"{stem}_zero_points"])
    if use.owner == 0:
        weight = consts[use.weight]
        for name, const in zip(names, _lazy(weight, use, bits, plan, names)):
            consts[name] = const
        return names
    body = graphs[use.owner]
    float_weight = next(t for t in body.initializer if t.name == use.weight)
    arrays = _cached(lambda: numpy_helper.to_array(float_weight), use, bits, plan)
    body.initializer.extend(numpy_helper.from_array(a, name) for a, name in zip(arrays, names))
    return names


def _tensors(values: np.ndarray, use: WeightUse, bits: int, plan: NbitsPlan) -> list[np.ndarray]:
    """The packed weight, scales and zero points of `values`, quantized a chunk of columns at a time."""
    weight = values if use.op == MATMUL else values.T  # an embedding [V, D]: blocks along D
    hessian, importance = plan.method.statistics(use.node) if use.op == MATMUL else (None, None)
    parts: list[list[np.ndarray]] = []
    for start, stop in chunks(use.n, use.k):
        qz = quantize_weight(weight[:, start:stop], bits, plan.block_size, plan.method, hessian, importance)
        packed = nbits_pack.matmul_tensors(qz) if use.op == MATMUL else nbits_pack.gather_tensors(qz, use.k)
        parts.append([p for p in packed if p is not None])
    return [np.concatenate(group) for group in zip(*parts)]


def _cached(values, use: WeightUse, bits: int, plan: NbitsPlan) -> list[np.ndarray]:
    """`_tensors` of the weight `values()` returns, from `plan.cache` when it holds them."""
    key = (use.weight, use.op, bits)
    if plan.cache is not None and key in plan.cache:
        return plan.cache[key]
    arrays = _tensors(values(), use, bits, plan)
    if plan.cache is not None:
        plan.cache[key] = arrays
    return arrays


def _lazy(weight: ConstTensor, use: WeightUse, bits: int, plan: NbitsPlan, names: list[str]) -> list[ConstTensor]:
    """Constants computed when the writer reaches the first (the others are kept until written)."""
    ready: dict[str, np.ndarray] = {}

    def compute(name: str):
        def get() -> np.ndarray:
            if not ready:
                ready.update(zip(names, _cached(weight.values, use, bits, plan)))
            return ready.pop(name)
        return get

    blocks = -(-use.k // plan.block_size)
    packed = (use.n, blocks, plan.block_size * bits // 8) if use.op == MATMUL else (use.n, use.k * bits // 8)
    zero = (use.n * -(-blocks * bits // 8),) if use.op == MATMUL else (use.n, -(-blocks * bits // 8))
    shapes = [packed, (use.n * blocks,) if use.op == MATMUL else (use.n, blocks), zero]
    kinds = [onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT, onnx.TensorProto.UINT8]
    return [ConstTensor(name, kind, shape, int(np.prod(shape)) * (4 if kind == onnx.TensorProto.FLOAT else 1),
                        compute=compute(name)) for name, kind, shape in zip(names, kinds, shapes)]


def _replace_node(graph: onnx.GraphProto, use: WeightUse, names: list[str], bits: int, plan: NbitsPlan) -> None:
    for i, node in enumerate(graph.node):
        if node.name == use.node and node.op_type == use.op:
            if use.op == MATMUL:
                new = nbits_pack.matmul_node(node, names, use.k, use.n, bits, plan.block_size,
                                             plan.accuracy_level.get(bits, 0))
            else:
                new = nbits_pack.gather_node(node, names, bits, plan.block_size)
            graph.node.remove(node)
            graph.node.insert(i, new)
            return


def _drop_unread(graphs: list[onnx.GraphProto], consts: dict[str, ConstTensor]) -> None:
    """Float weights no node or output reads any more (in any graph) are left out, and so are the
    graph inputs an IR 3 model listed them as."""
    read: set[str] = set()
    for graph in graphs:
        read |= used_names(graph)
    dropped = [n for n in consts if n not in read]
    for name in dropped:
        del consts[name]
    inputs = [i for i in graphs[0].input if i.name not in set(dropped)]
    if len(inputs) != len(graphs[0].input):
        del graphs[0].input[:]
        graphs[0].input.extend(inputs)
    for graph in graphs[1:]:
        kept = [t for t in graph.initializer if t.name in read]
        if len(kept) != len(graph.initializer):
            del graph.initializer[:]
            graph.initializer.extend(kept)
