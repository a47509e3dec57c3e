"""What changed between two models (float32 -> quantized/float16), as one table.

Why: Netron shows one model at a time; after a quantization the questions are "which ops did it
become, how many parameters and bytes of each type, how much faster, how much less accurate".
Contract:
- `model_diff(before, after, report=None)` reads both graphs (weights stay on disk: counts come
  from declared shapes) and returns a `ModelDiff`: rows of (section, name, before, after) for
  ops per type (and the node total), parameters and bytes per dtype (initializers and Constant
  values), the file size, and, from `report` (core/evaluate/report.py's dict) when it has them,
  latency p50 and accuracy per output (cosine; the reference is 1 by definition).
- `report_diff(report)` picks the two models a report is about (the quantization's source and
  result, else the two benchmarked models) and diffs them; None when the report names no pair or
  a file is gone. `diff_lines(rows)` is the text table the CLI prints.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import model_size
from onnxport.core.io.model_io import load_graph, tensor_nbytes
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import human_size

SECTIONS = ("size", "latency", "accuracy", "parameters", "bytes", "ops")  # in the order of the rows
_DTYPE_NAMES = {"float": "float32", "double": "float64"}


@dataclass
class DiffRow:
    section: str  # one of SECTIONS
    name: str  # op type, dtype, output name...
    before: float | int | None
    after: float | int | None

    def to_dict(self) -> dict:
        return {"section": self.section, "name": self.name, "before": self.before, "after": self.after}

    def cells(self) -> tuple[str, str, str]:
        """(before, after, change) as shown in the app's table and the CLI."""
        fmt = _FORMATS.get(self.section, str)
        before = "-" if self.before is None else fmt(self.before)
        after = "-" if self.after is None else fmt(self.after)
        return before, after, _change(self)


@dataclass
class ModelDiff:
    before: str
    after: str
    rows: list[DiffRow]

    def to_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "rows": [r.to_dict() for r in self.rows]}


def model_diff(before: str | Path, after: str | Path, report: dict | None = None) -> ModelDiff:
    """See the module docstring."""
    a, b = load_graph(before), load_graph(after)
    rows = [DiffRow("size", "file (with external data)", model_size(before), model_size(after))]
    rows += _measured_rows(report or {})  # the headline first: size, latency, accuracy
    (values_a, bytes_a), (values_b, bytes_b) = parameters_by_dtype(a), parameters_by_dtype(b)
    dtypes = sorted(set(values_a) | set(values_b))
    rows += [DiffRow("parameters", d, values_a.get(d, 0), values_b.get(d, 0)) for d in dtypes]
    rows += [DiffRow("bytes", d, bytes_a.get(d, 0), bytes_b.get(d, 0)) for d in dtypes]
    ops_a, ops_b = Counter(n.op_type for n in a.graph.node), Counter(n.op_type for n in b.graph.node)
    rows.append(DiffRow("ops", "all nodes", len(a.graph.node), len(b.graph.node)))
    rows += [DiffRow("ops", op, ops_a.get(op, 0), ops_b.get(op, 0)) for op in sorted(ops_a | ops_b)]
    return ModelDiff(str(before), str(after), rows)


def parameters_by_dtype(model: onnx.ModelProto) -> tuple[Counter, Counter]:
    """(values, bytes) per dtype name of the initializers and Constant-held tensors of the main graph."""
    values: Counter = Counter()
    nbytes: Counter = Counter()
    tensors = list(model.graph.initializer)
    tensors += [a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    for t in tensors:
        name = onnx.TensorProto.DataType.Name(t.data_type).lower()
        name = _DTYPE_NAMES.get(name, name)
        count = 1
        for d in t.dims:
            count *= int(d)
        values[name] += count
        nbytes[name] += tensor_nbytes(t)
    return values, nbytes


def _measured_rows(report: dict) -> list[DiffRow]:
    rows = []
    latency = (report.get("chart") or {}).get("latency_ms") or {}
    if latency.get("before") is not None or latency.get("after") is not None:
        rows.append(DiffRow("latency", "p50 (ms)", latency.get("before"), latency.get("after")))
    validation = (report.get("quantize") or {}).get("validation") or report.get("validation") or {}
    if validation.get("reference_kind") == "model":  # the after model against the before one
        rows += [DiffRow("accuracy", f"{o['name']} (cosine)", 1.0, o.get("cosine")) for o in validation["outputs"]]
    return rows


def report_pair(report: dict) -> tuple[Path, Path] | None:
    """The (before, after) models a report compares, if it names two."""
    q = report.get("quantize") or {}
    if q.get("source_path") and q.get("path"):
        return Path(q["source_path"]), Path(q["path"])
    models = (report.get("bench") or {}).get("models") or []
    if len(models) > 1:
        return Path(models[0]["path"]), Path(models[1]["path"])
    return None


def report_diff(report: dict) -> ModelDiff | None:
    """See the module docstring."""
    pair = report_pair(report)
    if pair is None or not all(p.is_file() for p in pair):
        return None
    try:
        return model_diff(*pair, report)
    except OnnxportError:
        return None


def diff_lines(diff: dict | ModelDiff) -> list[str]:
    """The diff as a text table: section, name, before, after, change."""
    rows = diff.rows if isinstance(diff, ModelDiff) else [DiffRow(**r) for r in diff.get("rows", [])]
    if not rows:
        return []
    table = [("", "", Path(_get(diff, "before")).name, Path(_get(diff, "after")).name, "change")]
    table += [(r.section, r.name, *r.cells()) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    lines = []
    for k, row in enumerate(table):
        section = row[0] if k == 0 or row[0] != table[k - 1][0] else ""
        cells = (section, *row[1:])
        lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))))
    return lines


def _get(diff, key: str) -> str:
    return getattr(diff, key) if isinstance(diff, ModelDiff) else diff.get(key, "")


def _change(row: DiffRow) -> str:
    if row.before is None or row.after is None:
        return ""
    if row.section == "accuracy":
        delta = accuracy_delta(row)
        return "" if delta == 0 else f"{delta:+.6f}"
    if row.section in ("ops", "parameters"):
        delta = int(row.after) - int(row.before)
        return "" if delta == 0 else f"{delta:+,d}"
    if not row.before:
        return "new" if row.after else ""
    return f"x{row.after / row.before:.3f}"


def accuracy_delta(row: DiffRow) -> float:
    """The change of an accuracy row (cosines: 1 at most, float rounding can pass it), 0.0 below
    what six decimals show: an fp16 model is never 'accuracy -0.000000'."""
    if row.before is None or row.after is None:
        return 0.0
    delta = min(float(row.after), 1.0) - min(float(row.before), 1.0)
    return 0.0 if abs(delta) < 5e-7 else delta


_FORMATS = {
    "ops": lambda v: f"{int(v):,d}", "parameters": lambda v: f"{int(v):,d}", "bytes": human_size,
    "size": human_size, "latency": lambda v: f"{v:.3f} ms", "accuracy": lambda v: f"{min(v, 1.0):.6f}",
}
