"""Which external-data files a model names, and which of them a new model makes obsolete.

Why: a model and its external data file are replaced as one unit (see `writer` and `staging`):
the new data file has a name unique to its run, and after the new model is renamed into place
the data file the previous model named is deleted. That needs the previous model's locations,
read cheaply and conservatively: only onnxport-style names are ever deleted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import onnx

from onnxport.core.util.file_names import companion_prefix

DATA_FILE_RE = r"(\.[0-9a-f]{8}(\.\d+)?)?\.data"  # after the model name: <name>.data, <name>.<run id>[.<i>].data
_SCAN_LIMIT = 64 << 20  # a model file bigger than this keeps its weights inline: not parsed for locations


def previous_data_files(model_path: Path) -> list[Path]:
    """The external-data files that the model now at `model_path` names and that a new model
    written there makes obsolete: only files named as onnxport names them (`<name>.data`,
    `<name>.<run id>.data`), never one the model shares under another name. A model too big or
    unreadable to check is taken to name none (a stray data file is safer than a lost one)."""
    folder = model_path.parent  # Path('m.onnx').parent is Path('.')
    names = dict.fromkeys([re.escape(model_path.name), re.escape(companion_prefix(model_path.name))])
    pattern = re.compile(f"({'|'.join(names)}){DATA_FILE_RE}")
    try:
        candidates = {e.name for e in os.scandir(folder) if pattern.fullmatch(e.name) and e.is_file()}
        if not candidates or not model_path.is_file() or model_path.stat().st_size > _SCAN_LIMIT:
            return []
        with open(model_path, "rb") as f:
            model = onnx.load_model(f, load_external_data=False)
    except Exception:  # noqa: BLE001 - an unreadable previous file names nothing we may delete
        return []
    return [folder / name for name in sorted(candidates & {data_location(t) for t in external_tensors(model.graph)})]


def external_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The tensors of `graph` and its subgraphs (initializers, attribute tensors) stored externally."""
    for t in graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            yield t
    for node in graph.node:
        for attr in node.attribute:
            for t in ([attr.t] if attr.HasField("t") else []) + list(attr.tensors):
                if t.data_location == onnx.TensorProto.EXTERNAL:
                    yield t
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from external_tensors(sub)


def data_location(tensor: onnx.TensorProto) -> str:
    return next((e.value for e in tensor.external_data if e.key == "location"), "")
