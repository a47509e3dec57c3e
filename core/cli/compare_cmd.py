"""`onnxport compare A B [--checkpoint-a CKPT] [--checkpoint-b CKPT] [--inputs DATA] [--json] [--check]`.

A and B: two ONNX models (float vs quantized, an eval graph + checkpoint vs its export, before
and after a deploy or opset conversion), or two parameter files (ORT checkpoints, safetensors,
npz, state_dict). For models: the structure (nodes matched even when renamed; added, removed,
changed; weights by content, Constant nodes included; inputs, outputs, opsets, metadata) and,
unless --no-run, both run in ONNX Runtime on the same inputs (given, else generated), every
matched tensor compared, and the first node where they part. For parameter files: every
parameter same, changed, of another shape, or only on one side.
A tensor departs when max abs > ATOL + RTOL x max|A| (or cosine < --min-cosine, or a non-finite
value differs). Exit 0 when compared; 2 on bad input; with --check, 1 when an output (or, with
--no-run, a weight) or a parameter departs.
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.input_options import add_input_options, input_sizes
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity
from onnxport.core.util.text import shown_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="compare two models or two checkpoints: structure and numbers",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="A", help="a model, or a parameter file")
    p.add_argument("b", metavar="B", help="a model, or a parameter file")
    p.add_argument("--checkpoint-a", action="append", default=[], metavar="CKPT",
                   help="parameters feeding A (an eval graph's checkpoint); repeatable")
    p.add_argument("--checkpoint-b", action="append", default=[], metavar="CKPT",
                   help="parameters feeding B; repeatable")
    p.add_argument("--inputs", metavar="DATA", help=".npz named like the inputs, or a folder (default: generated)")
    add_input_options(p)
    p.add_argument("--atol", type=float, default=1e-6, metavar="X", help="absolute tolerance (default 1e-6)")
    p.add_argument("--rtol", type=float, default=1e-5, metavar="X",
                   help="tolerance relative to A's largest value (default 1e-5)")
    p.add_argument("--min-cosine", type=float, metavar="X", help="also depart below this cosine")
    p.add_argument("--no-run", action="store_true", help="structure only: run neither model")
    p.add_argument("--top", type=int, default=10, metavar="N", help="differences listed per kind (default 10)")
    p.add_argument("--check", action="store_true", help="exit 1 when they differ beyond tolerance")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.compare.compare import compare
    from onnxport.core.compare.stats import Tolerance
    from onnxport.core.compare.summary import summary_lines
    from onnxport.core.util.errors import OnnxportError

    for name in ("atol", "rtol"):
        if getattr(args, name) < 0:
            raise OnnxportError(f"--{name} must be 0 or more, got {getattr(args, name)}")
    tolerance = Tolerance(atol=args.atol, rtol=args.rtol, min_cosine=args.min_cosine)
    report = compare(args.a, args.b, checkpoints_a=args.checkpoint_a, checkpoints_b=args.checkpoint_b,
                     inputs=args.inputs, tolerance=tolerance, run=not args.no_run, **input_sizes(args),
                     progress=StderrProgress(quiet=args.quiet, verbose=args.verbose), cancel=call_token())
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(shown_lines(summary_lines(report, max(args.top, 0))))
    return 1 if args.check and report.differs else 0
