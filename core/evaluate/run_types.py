"""Types of tensors that shape inference leaves without a rank, from one ONNX Runtime run.

Why: ONNX requires every graph output of a model to declare its element type and rank
(`onnx.checker` refuses a model whose output has no shape), but shape inference cannot follow
every graph: a Reshape whose target shape is computed (PP-OCR's recogniser, `p2o.MatMul.1`), an
If whose branches disagree. An export that keeps such a tensor as an output gets its type here.

Contract: `types_by_run(model_path, model, names, params)` runs `model` (the source graph as
loaded, its external data in `model_path`'s folder; a checkpoint's `params` fed to the parameter
inputs they fill) once on generated inputs that fit it (`first_run.fitted_feeds`: a child finds
inputs it runs on without a crash), with `names` as extra outputs, and returns `{name: type}` for
those it produced: the element type and the rank, every size unnamed (one run cannot tell which
sizes are fixed). Names it could not find are left out; it never raises for a model ORT cannot run
(`{}`): the caller decides (the export refuses such an output in one line).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.runtime import adapt_feed, session
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken


def types_by_run(model_path: str | Path, model: onnx.ModelProto, names: list[str],
                 params: ParameterSet | None = None, cancel: CancelToken | None = None) -> dict[str, onnx.TypeProto]:
    """See the module docstring."""
    model_path = Path(model_path)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    declared = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in declared)
    filled = {vi.name for vi in probe.graph.input if params is not None and vi.name in params}
    try:
        feeds = fitted_feeds(model_path, model=model, references=[(probe, model_path.parent)], count=1,
                             cancel=cancel)
        feed = feeds.first()
        sess = session(probe, label=model_path.name, external_folder=model_path.parent, optimize=False)
        for name in filled:
            feed[name] = params[name].values()
        values = sess.run(names, adapt_feed(feed, sess))
    except Cancelled:
        raise
    except Exception:  # noqa: BLE001 - ORT cannot run it (or no inputs fit): no type from here
        return {}
    found = {}
    for name, value in zip(names, values, strict=True):
        vtype = type_of_value(value)
        if vtype is not None:
            found[name] = vtype
    return found


def type_of_value(value) -> onnx.TypeProto | None:
    """A tensor's type (element type, rank, sizes unnamed) from what ORT returned; a sequence of
    tensors' when their element types and ranks agree; None for anything else."""
    if isinstance(value, list):
        items = [type_of_value(v) for v in value]
        if not items or any(t is None or t != items[0] for t in items):
            return None
        vtype = onnx.TypeProto()
        vtype.sequence_type.elem_type.CopyFrom(items[0])
        return vtype
    if not isinstance(value, np.ndarray):
        return None
    try:
        elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    except (KeyError, ValueError, TypeError):
        return None
    vtype = onnx.TypeProto()
    vtype.tensor_type.elem_type = elem
    vtype.tensor_type.shape.SetInParent()  # rank 0 is a shape too
    for _ in range(value.ndim):
        vtype.tensor_type.shape.dim.add()
    return vtype
