"""`onnxport bench MODEL [MODEL2] [--json]`: latency and throughput in ONNX Runtime, side by side.

With two models (e.g. float32 and quantized) they run interleaved on the same input, in blocks
A B B A, and the second is compared with the first block by block: size ratio, and the median
latency ratio with its 95% interval ("no measurable difference" when the interval holds 1.0).
Each timing covers enough runs to last >= 1 ms; throughput is from the median (p50), and the
p10-p90 spread says how steady the machine was (a note when it is wide).
`--providers cpu,openvino` runs one model on those execution providers instead, each in its ONNX
Runtime build's environment (`onnxport runtimes`), interleaved the same way: per provider p50,
spread, load time, its latency against CPU's with the interval, the nodes it ran and its
accuracy against CPU. Exit 1 when a provider could not run the model.
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.input_options import add_input_options, input_sizes, whole_number
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity
from onnxport.core.cli.provider_options import add_provider_options, parsed_providers
from onnxport.core.cli.report_option import check_report
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import shown_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bench", help="latency/throughput of one or two models in ONNX Runtime",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", metavar="MODEL", help="one or two ONNX models")
    p.add_argument("--inputs", metavar="DATA", help=".npz named like the inputs, or a folder (default: generated)")
    p.add_argument("--batch", type=whole_number(1, 1 << 20, "--batch"), default=1, help="samples per run (default 1)")
    add_input_options(p)
    p.add_argument("--seconds", type=float, default=2.0, help="measuring time per model (default 2)")
    p.add_argument("--threads", type=whole_number(1, 1024, "--threads"),
                   help="intra-op threads (default: ONNX Runtime's)")
    add_provider_options(p)
    p.add_argument("--report", metavar="REPORT.json", help="also write the report as JSON")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.evaluate.benchmark import benchmark
    from onnxport.core.evaluate.report import build_report, write_report

    if len(args.models) > 2:
        raise OnnxportError("bench takes one or two models")
    on = parsed_providers(args)
    if on is not None and len(args.models) != 1:
        raise OnnxportError("bench --providers takes one model")
    check_report(args.report, args.models, args.inputs)
    if on is not None:
        return _on_providers(args, *on)
    result = benchmark(args.models, inputs=args.inputs, batch=args.batch, **input_sizes(args),
                       seconds=args.seconds, threads=args.threads, progress=StderrProgress(quiet=args.quiet, verbose=args.verbose),
                       cancel=call_token())
    if args.report:
        write_report(args.report, build_report(bench=result))
    if args.json:
        json.dump(build_report(bench=result), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(shown_lines(result.summary_lines()))
    return 0


def _on_providers(args: argparse.Namespace, providers: list[str], options: dict) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.evaluate.report import build_report, write_report
    from onnxport.core.runtimes.run_on import run_on_providers

    if args.batch != 1:
        raise OnnxportError("bench --providers runs batch 1: give other sizes with --shape or --dim")
    result = run_on_providers(args.models[0], providers, options=options, inputs=args.inputs, seconds=args.seconds,
                              threads=args.threads, progress=StderrProgress(quiet=args.quiet, verbose=args.verbose),
                              cancel=call_token(), **input_sizes(args))
    report = build_report(providers=result)
    if args.report:
        write_report(args.report, report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(shown_lines(result.summary_lines()))
    return 1 if any(r.error for r in result.results) else 0
