"""How many nodes a model file's main graph holds, from its fields' headers alone.

Why: an open starts shape inference of a big file in a child before parsing it
(graph.shape_types); a file can be big for its weights alone (a 90 MB sentence transformer has
650 nodes), and then the child, a Python start on the other core, is only killed again. A field's
header (tag and length) says where the next one starts: the nodes are counted without parsing
the graph or reading its weights (the file is memory-mapped, only the headers' pages are read).

Contract: `count_nodes(path, enough)` returns the number of `graph.node` fields of the model in
`path`, or `enough` once it has counted that many; None when it cannot tell (not a regular file,
a layout the walk does not know, over `MAX_FIELDS` graph fields walked).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from onnxport.core.io.chunked_parse import GRAPH_FIELD, LENGTH_DELIMITED, Unknown, fields, graph_fields
from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.errors import OnnxportError

NODE_TAG = 1 << 3 | LENGTH_DELIMITED  # GraphProto.node: field 1, one tag byte
MAX_FIELDS = 50_000  # graph fields walked at most before giving up


def count_nodes(path: str | Path, enough: int) -> int | None:
    """See the module docstring."""
    try:
        regular_file(path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return None
            data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        with data:
            count = 0
            for number, wire, _start, value_start, end in fields(data, 0, size):
                if number == GRAPH_FIELD and wire == LENGTH_DELIMITED:  # repeated graph fields merge
                    count += _graph_nodes(data, value_start, end, enough - count)
                    if count >= enough:
                        return enough
            return count
    except (OSError, ValueError, IndexError, Unknown, OnnxportError):
        return None


def _graph_nodes(data: mmap.mmap, start: int, end: int, enough: int) -> int:
    """Node fields in the graph at `data[start:end]`, up to `enough` (`chunked_parse.graph_fields`)."""
    count = 0
    for walked, (tag, _end) in enumerate(graph_fields(data, start, end)):
        if tag == NODE_TAG:
            count += 1
            if count >= enough:
                return count
        if walked >= MAX_FIELDS:
            raise Unknown()
    return count
