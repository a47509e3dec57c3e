"""`onnxport inspect MODEL_OR_CHECKPOINT [--checkpoint CKPT ...] [--json] [--all] [--tensor NAME]`.

Given a model: its inputs, outputs, the forward outputs an eval graph hides, parameters, and (with
--all or --json) every tensor, those inside If/Loop/Scan bodies under their node; given a
checkpoint: its tensors, trainable/frozen split, optimizer state and properties; given both: how
the checkpoint's parameters match the model's. With --tensor NAME: that weight's statistics (min,
max, mean, std, zeros, non-finite counts), histogram and first values, read in bounded chunks.
Files of a folder that are not used: the text lists the first 20 and counts the rest (a folder of
100,000 files would flood the terminal); --json lists every one under "not_used", for scripts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import human_size, shown

NOT_USED_SHOWN = 20  # files not used listed in text

if TYPE_CHECKING:  # the modules behind them import onnx and numpy: not at parser build
    from onnxport.core.graph.index import TensorIndex, TensorInfo
    from onnxport.core.io.parameter_set import ParameterSet
    from onnxport.core.params.match import ParamMatch
    from onnxport.core.workflow.session import ModelSession


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help="list a model's tensors and/or a checkpoint's contents",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="an ONNX model, a checkpoint, or a folder of training artifacts")
    p.add_argument("--checkpoint", action="append", default=[], metavar="CKPT",
                   help="checkpoint(s) to match against the model (repeatable; merged)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables (every file not used listed)")
    p.add_argument("--all", action="store_true", help="list every tensor, not only inputs/outputs")
    p.add_argument("--tensor", metavar="NAME", help="a weight's statistics, histogram and first values")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.workflow.sources import open_sources

    loaded = open_sources([args.source, *args.checkpoint], cancel=call_token())
    if loaded.index is None and loaded.params is None:
        raise nothing_readable(args.source, loaded)
    if args.tensor:
        return print_tensor(loaded, args.tensor, args.json)
    data = to_dict(loaded, include_all=args.all or args.json)
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_tables(loaded, include_all=args.all)
    return 0


PAGE = 16  # values printed with --tensor
SHADES = " ▁▂▃▄▅▆▇█"


def print_tensor(loaded: ModelSession, name: str, as_json: bool) -> int:
    """`--tensor NAME`: the weight's statistics (`params.tensor_stats`), as text or JSON."""
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.params.tensor_stats import tensor_page, tensor_stats

    values = loaded.tensor_values(name)
    stats = tensor_stats(values, cancel=call_token())
    page = [v if not isinstance(v, float) or math.isfinite(v) else str(v) for v in tensor_page(values, 0, PAGE).tolist()]
    if as_json:
        json.dump({"tensor": stats.to_dict() | {"values": page}}, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    shape = "x".join(str(d) for d in stats.shape) or "scalar"
    print(shown(f"{stats.name}: {stats.dtype} [{shape}], {stats.count:,} values, from the {stats.source}"))
    if stats.min is not None:
        print(f"min {stats.min:.6g}  max {stats.max:.6g}  mean {stats.mean:.6g}  std {stats.std:.6g}")
    print(f"zeros {stats.zeros:,}  NaN {stats.nan:,}  +inf {stats.posinf:,}  -inf {stats.neginf:,}")
    if stats.histogram:
        top = max(stats.histogram)
        bars = "".join(SHADES[-1 if c == top else (c * (len(SHADES) - 1)) // top] if c else SHADES[0]
                       for c in stats.histogram)
        print(f"histogram ({len(stats.histogram)} bins, {stats.edges[0]:.4g} .. {stats.edges[-1]:.4g}): {bars}")
    print(f"values [0:{len(page)}]: " + " ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in page))
    return 0


def nothing_readable(source: str, loaded: ModelSession) -> OnnxportError:
    """The error for a source holding no model and no parameters (a folder of other files...)."""
    from onnxport.core.workflow.open_refusal import nothing_to_open

    return nothing_to_open(source, loaded, "import PyTorch programs with 'onnxport torch-export'")


def _tensor_dict(t: TensorInfo) -> dict:
    return {
        "name": t.name, "kind": t.kind.value, "dtype": t.dtype,
        "shape": list(t.shape) if t.shape is not None else None,
        "producer": t.producer, "op": t.producer_op, "consumers": t.consumers, "scope": t.scope,
        "training_only": t.training_only, "graph_output": t.is_graph_output, "bytes": t.nbytes,
        "subgraph": t.subgraph or None,
    }


def _params_dict(params: ParameterSet) -> dict:
    return {
        "kind": params.kind, "files": [str(p) for p in params.sources], "version": params.version,
        "nominal": params.nominal, "count": len(params), "bytes": params.nbytes,
        "trainable": len(params.trainable), "frozen": len(params.frozen),
        "tensors": [{"name": n, "dtype": p.dtype, "shape": list(p.shape), "trainable": p.trainable}
                    for n, p in params.params.items()],
        "optimizer_groups": [
            {"name": g.name, "step": g.step, "initial_learning_rate": g.initial_learning_rate,
             "states": {name: sorted(s) for name, s in g.states.items()}}
            for g in params.optimizer_groups
        ],
        "properties": params.properties,
    }


def _match_dict(match: ParamMatch) -> dict:
    return {
        "ok": match.ok, "summary": match.summary(), "matched": len(match.matched), "missing": match.missing,
        "unexpected": match.unexpected, "trainable": len(match.trainable), "frozen": len(match.frozen),
        "mismatched": [{"name": m.name, "model": m.expected, "checkpoint": m.got} for m in match.mismatched],
        "nominal": match.nominal,
    }


def _index_dict(index: TensorIndex, include_all: bool) -> dict:
    t = index.tensors
    result = {
        "file": str(index.path) if index.path else None, "ir_version": index.ir_version, "opsets": index.opsets,
        "producer": index.producer, "nodes": index.node_count, "tensor_count": len(index),
        "inputs": [_tensor_dict(t[n]) for n in index.graph_inputs],
        "outputs": [_tensor_dict(t[n]) for n in index.graph_outputs],
        "suggested_outputs": index.suggested, "default_outputs": index.default_outputs(),
        "parameter_count": len(index.parameters),
    }
    if include_all:
        result["tensors"] = [_tensor_dict(x) for x in t.values()]
        result["subgraphs"] = [sub.to_dict() | {"tensors": [_tensor_dict(x) for x in sub.tensors]}
                               for sub in index.subgraphs]
    return result


def to_dict(loaded: ModelSession, include_all: bool = True) -> dict:
    data: dict = {}
    if loaded.index is not None:
        data["model"] = _index_dict(loaded.index, include_all)
    if loaded.params is not None:
        data["checkpoint"] = _params_dict(loaded.params)
    if loaded.match is not None:
        data["match"] = _match_dict(loaded.match)
    if loaded.alignment is not None:
        data["alignment"] = loaded.alignment.to_dict()
    if loaded.ortmodule is not None:
        data["ortmodule"] = {"prefix": loaded.ortmodule.prefix, "files": [str(p) for p in loaded.ortmodule.paths()]}
    if loaded.others:
        data["not_used"] = [{"path": str(p), "kind": k.value} for p, k in loaded.others]
    return data


def _table(rows: list[list[str]], header: list[str]) -> None:
    rows = [[shown(str(c)) for c in r] for r in rows]  # names from the file: no terminal escapes
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))


def _rows(index: TensorIndex, names: list[str]) -> list[list[str]]:
    rows = []
    for n in names:
        t = index.tensors[n]
        flags = "training-only" if t.training_only else ""
        rows.append([n, t.dtype or "?", t.shape_text, t.producer_op or "-", flags])
    return rows


def _print_subgraphs(index: TensorIndex) -> None:
    """Each body under its node, indented by depth, with the outer tensors it reads and its own."""
    if index.subgraphs:
        print(f"\nInside sub-graphs ({len(index.subgraphs)} bodies):")
    for sub in index.subgraphs:
        pad = "  " * sub.depth
        reads = f"; reads {', '.join(sub.captures)}" if sub.captures else ""
        print("\n" + shown(f"{pad}{sub.node} ({sub.op}) {sub.attribute}: {sub.nodes} nodes, {len(sub.tensors)} tensors{reads}"))
        rows = [[shown(str(c)) for c in (t.name, t.kind.value, t.dtype or "?", t.shape_text, t.producer_op or "-")]
                for t in sub.tensors]
        widths = [max(len(r[i]) for r in rows) for i in range(5)] if rows else []
        for r in rows:
            print(pad + "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def print_tables(loaded: ModelSession, include_all: bool) -> None:
    index = loaded.index
    if index is not None:
        name = Path(index.path).name if index.path else "model"
        opsets = ", ".join(f"{d} {v}" for d, v in index.opsets.items())
        print(shown(f"{name}: IR {index.ir_version}, opsets {opsets}; {index.node_count} nodes, {len(index)} tensors, "
                    f"{len(index.parameters)} parameters"))
        print("\nInputs:")
        _table(_rows(index, index.graph_inputs) or [["(none)", "", "", "", ""]], ["name", "dtype", "shape", "op", ""])
        print("\nGraph outputs:")
        _table(_rows(index, index.graph_outputs), ["name", "dtype", "shape", "op", ""])
        if index.suggested:
            print("\nForward outputs inside the graph (usable with --outputs):")
            _table(_rows(index, index.suggested), ["name", "dtype", "shape", "op", ""])
        print("\n" + shown(f"Default outputs for export: {', '.join(index.default_outputs()) or '(none)'}"))
        if include_all:
            print("\nAll tensors:")
            _table([[t.name, t.kind.value, t.dtype or "?", t.shape_text, t.producer_op or "-", t.scope]
                    for t in index.tensors.values()], ["name", "kind", "dtype", "shape", "op", "scope"])
            _print_subgraphs(index)
    params = loaded.params
    if params is not None:
        files = ", ".join(Path(p).name for p in params.sources)
        nominal = "  NOMINAL (names only, no values)" if params.nominal else ""
        print("\n" + shown(f"Checkpoint {files} ({params.kind}, version {params.version}): {len(params)} tensors, "
                           f"{human_size(params.nbytes)}, {len(params.trainable)} trainable, "
                           f"{len(params.frozen)} frozen{nominal}"))
        if include_all or index is None:
            _table([[n, p.dtype, str(list(p.shape)), "trainable" if p.trainable else
                     "frozen" if p.trainable is False else ""] for n, p in params.params.items()],
                   ["name", "dtype", "shape", ""])
        for g in params.optimizer_groups:
            print(shown(f"  optimizer group '{g.name}': step {g.step}, initial lr {g.initial_learning_rate:g}, "
                        f"state for {len(g.states)} parameters"))
        for key, value in params.properties.items():
            print(shown(f"  property {key} = {value!r}"))
    if loaded.ortmodule is not None:
        print("\n" + shown(f"ORTModule graphs {loaded.ortmodule.describe()}; using {Path(loaded.model_path).name}"))
    if loaded.alignment is not None:
        print("\n" + shown(f"Parameter names fitted to the model: {loaded.alignment.how()}"))
    if loaded.match is not None:
        m = loaded.match
        print("\n" + shown(f"Match: {m.summary()}"))
        for name in m.missing[:20]:
            print(shown(f"  missing from checkpoint: {name}"))
        for name in m.unexpected[:20]:
            print(shown(f"  not in the model: {name}"))
        for mm in m.mismatched[:20]:
            print(shown(f"  mismatch: {mm.name}: model {mm.expected}, checkpoint {mm.got}"))
    _print_not_used(loaded.others)


def _print_not_used(others) -> None:
    """The first NOT_USED_SHOWN files not used, one a line, then how many more (--json has all)."""
    if others:
        print()
    for path, kind in others[:NOT_USED_SHOWN]:
        print(shown(f"Not used: {path} ({kind.value})"))
    if len(others) > NOT_USED_SHOWN:
        print(f"... and {len(others) - NOT_USED_SHOWN:,} more not used (--json lists every one)")
