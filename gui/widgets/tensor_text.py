"""How a tensor reads in the tree and the details panel (Qt-free, so it tests without a window).

- `short_name(info)`: under its scope's group a row needs only what its scope does not say:
  `/encoder/layer.3/output/LayerNorm/ReduceMean_output_0` under `encoder/.../LayerNorm` reads
  `ReduceMean_output_0`; a name that does not start with its scope is shown whole.
- `readable_shape(shape)`: named dims kept (`batch`), `?` for dims nobody named (`None`, and the
  `unk__N` placeholders onnx's shape inference invents), `?` for an unknown rank.
"""

from __future__ import annotations

import re

from onnxport.core.graph.tensor_info import Dim, TensorInfo

_INVENTED_DIM = re.compile(r"unk__\d+")


def short_name(info: TensorInfo) -> str:
    name, scope = info.name, info.scope
    if scope:
        for prefix in ("/" + scope + "/", scope + "/"):
            if name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix):]
    return name


def readable_dim(dim: Dim) -> str:
    if dim is None or (isinstance(dim, str) and (not dim or _INVENTED_DIM.fullmatch(dim))):
        return "?"
    return str(dim)


def readable_shape(shape: tuple[Dim, ...] | None) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join(readable_dim(d) for d in shape) + "]"
