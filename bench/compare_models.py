"""Model pairs for the compare benchmark: a noisy detector, a renamed big graph, a > 2 GB pair.

- `noisy_copy`: a model with Gaussian noise in the weight of its middle Conv (a Constant node's
  value, as PP-OCR holds its weights, or an initializer);
- `renamed_copy`: every node and intermediate tensor renamed, a few weights changed (what a
  converter that renumbers does, plus a fine-tune);
- `big_pair`: an MLP of square float32 layers past 2 GB in external data, and a copy that shares
  that data file for all but its middle layer, which is noisy and in a file of its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper


def noisy_copy(src: Path, out: Path, sigma: float = 0.02) -> Path:
    model = onnx.load(str(src))
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    weight = convs[len(convs) // 2].input[1]
    holders = [n.attribute[0].t for n in model.graph.node if n.op_type == "Constant" and n.output[0] == weight]
    holders += [t for t in model.graph.initializer if t.name == weight]
    tensor = holders[0]
    values = numpy_helper.to_array(tensor)
    noisy = values + np.random.default_rng(0).normal(0, sigma, values.shape).astype(values.dtype)
    tensor.CopyFrom(numpy_helper.from_array(noisy, tensor.name))
    onnx.save(model, str(out))
    return out


def renamed_copy(src: Path, out: Path, changed_weights: int = 5) -> list[str]:
    """Write the renamed copy; return the names of the weights changed."""
    model = onnx.load(str(src))
    graph = model.graph
    keep = {o.name for o in graph.output} | {i.name for i in graph.input} | {t.name for t in graph.initializer}
    names: dict[str, str] = {}
    for i, node in enumerate(graph.node):
        node.name = f"n{i}"
        for k, o in enumerate(node.output):
            if o and o not in keep:
                names[o] = f"t{i}.{k}"
                node.output[k] = names[o]
    for node in graph.node:
        for k, x in enumerate(node.input):
            node.input[k] = names.get(x, x)
    floats = [t for t in graph.initializer if t.data_type == T.FLOAT and len(t.dims) == 2]
    step = max(1, len(floats) // max(changed_weights, 1))
    changed = floats[::step][:changed_weights]
    for t in changed:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) + np.float32(0.01), t.name))
    onnx.save(model, str(out))
    return [t.name for t in changed]


def _external(name: str, width: int, location: str, offset: int) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=[width, width], data_location=T.EXTERNAL)
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(width * width * 4))):
        t.external_data.add(key=key, value=value)
    return t


def _mlp(path: Path, weights: list[onnx.TensorProto], width: int) -> None:
    nodes, h = [], "x"
    for i, w in enumerate(weights):
        nodes.append(helper.make_node("MatMul", [h, w.name], [f"mm{i}"], name=f"/layer{i}/MatMul"))
        h = f"relu{i}" if i < len(weights) - 1 else "y"
        nodes.append(helper.make_node("Relu", [f"mm{i}"], [h], name=f"/layer{i}/Relu"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", T.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, width])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def big_pair(folder: Path, width: int = 12288, layers: int = 4) -> tuple[Path, Path]:
    """(a.onnx, b.onnx): see the module docstring; a's weights are 4 x 576 MiB by default."""
    rng = np.random.default_rng(0)
    offsets = []
    scale = np.float32(1 / np.sqrt(width))
    with open(folder / "big.data", "wb") as f:
        for _ in range(layers):
            offsets.append(f.tell())
            for row in range(0, width, 1024):  # a slab at a time: the writer stays small
                f.write((rng.standard_normal((min(1024, width - row), width), dtype=np.float32) * scale).tobytes())
    middle = layers // 2
    a = [_external(f"w{i}", width, "big.data", offsets[i]) for i in range(layers)]
    _mlp(folder / "a.onnx", a, width)
    with open(folder / "big.data", "rb") as src, open(folder / "noisy.data", "wb") as dst:
        src.seek(offsets[middle])
        for _ in range(0, width, 1024):
            slab = np.frombuffer(src.read(1024 * width * 4), np.float32)
            dst.write((slab + rng.normal(0, 0.01, slab.shape).astype(np.float32)).tobytes())
    b = [_external(f"w{i}", width, "noisy.data" if i == middle else "big.data", 0 if i == middle else offsets[i])
         for i in range(layers)]
    _mlp(folder / "b.onnx", b, width)
    return folder / "a.onnx", folder / "b.onnx"
