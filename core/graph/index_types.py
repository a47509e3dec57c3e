"""Types an index was built without, filled in later (`build_index(wait_types=False)`).

Why: shape inference of a big graph can take longer than everything else the open does; the app
shows the tree as soon as the index exists and fills dtypes and shapes when the child answers, in
a side job. Once filled, the index is what `build_index` would have returned had it waited.

Contract: `fill_types(index, cancel)` waits for the pending child (`index.pending_types`), falls
back to `infer_value_info` if it failed, sets `dtype`/`shape` of node and graph outputs in place,
and returns how many changed (0 when nothing was pending). The `TensorInfo`s stay the same objects
(the tree keeps pointing at them); a reader on another thread sees a tensor's old or new type,
never an error. A cancel stops the child: types stay unknown. `wait_types(index, cancel)` only
waits for the child's answer (no parsing), so the app can run it outside its side jobs' lane.
"""

from __future__ import annotations

from onnxport.core.graph.index import TensorIndex, infer_value_info
from onnxport.core.graph.tensor_info import shape_of
from onnxport.core.io.model_io import release
from onnxport.core.util.progress import CancelToken


def wait_types(index: TensorIndex, cancel: CancelToken | None = None) -> None:
    """Wait for the pending child's answer, if any (see the module docstring)."""
    pending = index.pending_types
    if pending is not None:
        pending.inference.wait(cancel)


def fill_types(index: TensorIndex, cancel: CancelToken | None = None) -> int:
    """See the module docstring."""
    pending, index.pending_types = index.pending_types, None
    if pending is None:
        return 0
    try:
        found = pending.inference.result(cancel)
    finally:
        pending.inference.close()
    if found is not None:
        lookup = found.get
    else:
        infos = infer_value_info(pending.model, pending.path, cancel=cancel)

        def lookup(name: str):
            vi = infos.get(name)
            return shape_of(vi.type) if vi is not None else None

    outputs = set(index.graph_outputs)
    unknown = (None, None)
    changed = 0
    for info in index.tensors.values():
        if info.producer is None and info.name not in outputs:
            continue  # inputs and parameters keep their declared types
        dtype, shape = lookup(info.name) or unknown
        if dtype != info.dtype or shape != info.shape:
            info.shape, info.dtype = shape, dtype
            changed += 1
    if found is not None:  # an item at a time: freed at once it holds the GIL throughout
        release(found)
    return changed
