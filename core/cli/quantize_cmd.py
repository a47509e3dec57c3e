"""`onnxport quantize MODEL -o OUT --mode dynamic|static|fp16|int4 [--calibration DATA] ...`.

Quantizes (int8 dynamic, int8 static QDQ, int4 weight-only MatMulNBits for large MatMul weights)
or converts (float16) a float32 model, keeping the
nodes that cost accuracy in float until every output reaches the cosine target on the validation
inputs (default 0.99), and prints (or --json) what was written, what stayed float and the
validation against the float32 model on held-out inputs the search never saw. Exit 0 when the
model was written (with --no-target too: the figures are printed, no verdict); 2 when nothing was.
`--providers cpu,openvino` then runs the written model on those execution providers against CPU
(`validate --providers`; each output's cosine against CPU must reach --target): exit 1 naming
those that do not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from onnxport.core.cli.export_cmd import split_names
from onnxport.core.cli.input_options import add_input_options, input_sizes
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity, brief
from onnxport.core.cli.provider_options import add_provider_options, parsed_providers, run_providers
from onnxport.core.cli.report_option import check_report
from onnxport.core.quantize import MODES
from onnxport.core.util.out_paths import file_destination
from onnxport.core.util.text import shown_lines

BENCH_SECONDS = 1.0  # -v: the float and the quantized model timed for the table's latency row


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("quantize", help="quantize (int8 dynamic/static, int4 weights) or convert (fp16) a model",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="float32 ONNX model")
    p.add_argument("-o", "--output", dest="out", required=True, type=file_destination, metavar="OUT.onnx", help="file to write")
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--calibration", metavar="DATA",
                   help="static: calibration inputs (.npz with arrays named like the inputs or unnamed in their "
                        "order, a folder of .npy/.npz, or a .txt of lines for a Hugging Face model's tokenizer); "
                        "needed unless the model takes text and its tokenizer is known (bundled sentences are "
                        "used); 'generated': random inputs from the input specs")
    p.add_argument("--tokenizer", metavar="FOLDER",
                   help="Hugging Face tokenizer folder for a .txt --calibration (default: beside the model or the text)")
    p.add_argument("--block-size", type=int, default=32, metavar="N",
                   help="int4: values per quantization block along K (32 or 128 typical; default 32)")
    p.add_argument("--int4-method", default="auto", choices=("auto", "rtn", "hqq", "gptq"),
                   help="int4: how block scales are chosen: rtn (round to nearest), hqq (optimised scales), gptq "
                        "(error compensation; needs --calibration); auto: gptq with --calibration, else hqq")
    p.add_argument("--symmetric", action="store_true", help="int4: symmetric blocks (no zero points)")
    p.add_argument("--per-channel", action=argparse.BooleanOptionalAction, default=None,
                   help="per-channel weight scales (default: dynamic tries per-channel first)")
    p.add_argument("--reduce-range", action=argparse.BooleanOptionalAction, default=None,
                   help="7-bit weights (default: chosen for this CPU's int8 path, see --int8-path)")
    p.add_argument("--int8-path", default="auto", metavar="PATH",
                   help="the CPU int8 kernels to quantize for: auto (detected), avx2, avx512bw (7-bit weights, "
                        "exact on every CPU), avx512-vnni, avx-vnni, amx, arm-dotprod (8-bit weights)")
    p.add_argument("--op-types", action="append", default=[], metavar="A[,B...]",
                   help="op types to quantize (dynamic default: MatMul,Gather,Attention,LSTM,EmbedLayerNormalization; "
                        "static: Conv,MatMul,Gemm, the ones with int8 kernels)")
    p.add_argument("--exclude", action="append", default=[], metavar="NODE[,NODE...]",
                   help="node names to keep in float")
    p.add_argument("--fp16-io", action="store_true", help="fp16: make inputs/outputs float16 too")
    p.add_argument("--block-ops", action="append", default=[], metavar="A[,B...]", help="fp16: op types kept float32")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--target", type=float, default=0.99, metavar="COSINE",
                        help="accuracy target: min cosine per output vs float32 (default 0.99)")
    target.add_argument("--no-target", action="store_true", help="no accuracy target: quantize everything asked")
    p.add_argument("--validation-inputs", metavar="DATA",
                   help="inputs for the accuracy check (.npz or folder): the search tunes on part of them, the "
                        "verdict is measured on the rest (held out); default: bundled sentences for a text model "
                        "with its tokenizer, else generated")
    add_input_options(p)
    p.add_argument("--no-preprocess", action="store_true", help="skip ONNX Runtime's pre-processing")
    add_provider_options(p)
    p.add_argument("--report", metavar="REPORT.json", help="also write the report as JSON")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.evaluate.model_diff import diff_lines
    from onnxport.core.evaluate.report import build_report, write_report
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    on = parsed_providers(args)
    check_report(args.report, args.model, args.out, args.calibration, args.validation_inputs)
    generated = args.calibration == "generated" and not Path(args.calibration).exists()
    options = QuantizeOptions(
        calibration=None if generated else args.calibration, calibration_required=not generated,
        per_channel=args.per_channel, reduce_range=args.reduce_range, int8_path=args.int8_path,
        op_types=split_names(args.op_types) or None, exclude_nodes=split_names(args.exclude),
        keep_io_types=not args.fp16_io, block_ops=split_names(args.block_ops),
        accuracy_target=None if args.no_target else args.target, validation_inputs=args.validation_inputs,
        preprocess=not args.no_preprocess, tokenizer=args.tokenizer, block_size=args.block_size,
        int4_method=args.int4_method, symmetric=args.symmetric,
        **input_sizes(args),
    )
    progress = StderrProgress(quiet=args.quiet, verbose=args.verbose)
    result = quantize(args.model, args.out, args.mode, options, progress=progress, cancel=call_token())
    bench = None
    if args.verbose and not args.json:  # the table's latency row, as `export --quantize -v` shows it
        from onnxport.core.evaluate.benchmark import benchmark

        bench = benchmark([args.model, result.path], inputs=args.validation_inputs, seconds=BENCH_SECONDS,
                          progress=progress, cancel=call_token(), **input_sizes(args))
    providers = None
    if on is not None:  # the written model where it will run, against CPU (core/runtimes/)
        providers = run_providers(args, result.path, on, progress, inputs=args.validation_inputs, target=args.target)
    full = build_report(quantize=result, bench=bench, providers=providers)
    if args.report:
        write_report(args.report, full)
    if args.json:
        json.dump(full, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        table = ["before/after:"] + diff_lines(full["diff"]) if "diff" in full else []
        print(shown_lines(brief(result.summary_lines() + table, args.verbose)))
        if providers is not None:
            print(shown_lines(providers.summary_lines()))
    if providers is not None and not providers.passed:
        return 1
    return 0 if result.target is None or result.validation is None or result.validation.passed else 1
