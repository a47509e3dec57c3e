"""`onnxport validate MODEL --reference REF [--checkpoint CKPT ...] [--inputs DATA.npz] [--json]`.

Runs MODEL and its reference in ONNX Runtime on the same inputs (from --inputs, else generated
from MODEL's input specs) and compares every output: max/mean abs diff, cosine, argmax agreement.
The reference is REF fed with the checkpoint's parameters (an eval graph + checkpoint), or REF
itself (the float32 model a quantized one came from). For quantized models it also lists the
nodes adding the most error; `--requantize OUT` quantizes REF again as MODEL was, keeping the
worst `--exclude-worst N` of them in float, and validates that. `--providers cpu,openvino` also
runs MODEL on those execution providers, each in its ONNX Runtime build's environment
(`onnxport runtimes`), against CPU: nodes each ran, cosine and max abs diff per output (target:
cosine >= 0.999 unless --min-cosine), p50 latency and load time (REF is optional then).
Exit 0 if passed, 1 if not (naming the providers below the target), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.input_options import add_input_options, input_sizes
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity
from onnxport.core.cli.provider_options import add_provider_options, parsed_providers
from onnxport.core.cli.report_option import check_report
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import shown, shown_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate", help="compare a model's outputs with its reference's",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the model to check (an export, a quantized model)")
    p.add_argument("--reference", metavar="REF", help="eval graph (with --checkpoint) or float32 model "
                   "(required unless --providers)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="CKPT",
                   help="parameters to feed REF with (repeatable: several are merged)")
    p.add_argument("--inputs", metavar="DATA", help=".npz named like the inputs, or a folder of .npy/.npz")
    add_input_options(p)
    p.add_argument("--min-cosine", type=float, metavar="X", help="pass threshold on cosine (per output)")
    p.add_argument("--max-abs-diff", type=float, metavar="X", help="pass threshold on max abs diff")
    p.add_argument("--layers", action="store_true", help="rank nodes by added error (default for quantized models)")
    p.add_argument("--requantize", metavar="OUT.onnx",
                   help="quantize REF again as MODEL was, keeping the worst nodes in float; validate that")
    p.add_argument("--exclude-worst", type=int, default=3, metavar="N", help="with --requantize: nodes to keep (3)")
    add_provider_options(p)
    p.add_argument("--seconds", type=float, default=1.0, help="with --providers: timing per provider (default 1)")
    p.add_argument("--report", metavar="REPORT.json", help="also write the report as JSON")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.evaluate.compare import Thresholds
    from onnxport.core.evaluate.report import build_report
    from onnxport.core.evaluate.validate import validate
    from onnxport.core.io.parameter_set import merge_parameter_sets
    from onnxport.core.io.readers import read_parameters

    on = parsed_providers(args)
    if args.reference is None and on is None:
        raise OnnxportError("validate needs --reference REF, or --providers to compare execution providers with CPU")
    check_report(args.report, args.model, args.reference, args.checkpoint, args.inputs)
    progress = StderrProgress(quiet=args.quiet, verbose=args.verbose)
    thresholds = None
    if args.min_cosine is not None or args.max_abs_diff is not None:
        thresholds = Thresholds(min_cosine=args.min_cosine if args.min_cosine is not None else 0.0,
                                max_abs_diff=args.max_abs_diff)
    providers = _on_providers(args, on, thresholds, progress) if on else None
    if args.reference is None:
        return _print(args, build_report(providers=providers), providers)
    params = merge_parameter_sets([read_parameters(c) for c in args.checkpoint]) if args.checkpoint else None
    report = validate(args.model, args.reference, params=params, inputs=args.inputs, thresholds=thresholds,
                      layers=True if args.layers or args.requantize else None, progress=progress,
                      cancel=call_token(), **input_sizes(args))
    requantized = None
    if args.requantize:
        from onnxport.core.quantize.quantize import QuantizeOptions, requantize

        worst = report.worst_nodes(args.exclude_worst)
        inputs = QuantizeOptions(validation_inputs=args.inputs, **input_sizes(args))
        requantized = requantize(args.model, args.reference, args.requantize, worst, inputs,
                                 progress=progress, cancel=call_token())
    full = build_report(validation=report, quantize=requantized, providers=providers)
    if not args.json:
        print(shown_lines(report.summary_lines()))
        if report.layers and not requantized and report.precision != "float32" and not report.passed:
            names = ",".join(report.worst_nodes(3))
            if names:
                print(shown(f"  to keep them in float: onnxport validate {args.model} --reference {args.reference} "
                            f"--requantize OUT.onnx (or onnxport quantize ... --exclude {names})"))
        if requantized is not None:
            print(shown_lines(requantized.summary_lines()))
    final = requantized.validation if requantized is not None else report
    code = _print(args, full, providers)
    return code if final is None or final.passed else 1


def _on_providers(args: argparse.Namespace, on: tuple[list[str], dict], thresholds, progress):
    from onnxport.core.cli.input_options import input_sizes as sizes
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.runtimes.run_on import run_on_providers

    providers, options = on
    return run_on_providers(args.model, providers, options=options, inputs=args.inputs, thresholds=thresholds,
                            seconds=args.seconds, progress=progress, cancel=call_token(), **sizes(args))


def _print(args: argparse.Namespace, full: dict, providers) -> int:
    """Write and print the report (the providers' part after the rest); 1 when a provider fails."""
    from onnxport.core.evaluate.report import write_report

    if args.report:
        write_report(args.report, full)
    if args.json:
        json.dump(full, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif providers is not None:
        print(shown_lines(providers.summary_lines()))
        if not providers.passed:
            print(f"below the accuracy target or not run: {', '.join(providers.failing())}")
    return 0 if providers is None or providers.passed else 1
