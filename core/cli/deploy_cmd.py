"""`onnxport deploy MODEL --target ort-mobile|ort-X.Y -o OUT [--shape INPUT=AxB...] [--dim NAME=N]`.

Makes a model ready for the runtime it will run in: an ONNX Runtime release (`ort-1.17`: the
opset and IR version it reads, converted down or refused naming the op), or ORT Mobile
(`ort-mobile`: OUT.ort plus the operator config of a reduced build, and ORT's NNAPI/CoreML
verdict); `--shape`/`--dim` fix input sizes (`--dim batch=dynamic` makes the batch dynamic again).
The artifact is loaded in ONNX Runtime and compared with the model before it is put in place; a
refusal or a mismatch writes nothing (exit 2). Prints what was converted and kept (or --json).
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.progress_line import add_verbosity
from onnxport.core.util.out_paths import file_destination
from onnxport.core.util.text import shown_lines

TARGET_HELP = ("ort-mobile (an .ort file + the operator config of a reduced build) or ort-X.Y (the opset and "
               "IR version ONNX Runtime X.Y reads, e.g. ort-1.17)")


def add_target_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """`--target`; on `export` (not required) the result is then deployed beside it."""
    after = "" if required else ("; the result is then deployed beside it (OUT.ort, OUT.ort-X.Y.onnx), checked, "
                                 "with --shape/--dim fixed in it (--dim NAME=dynamic frees one)")
    parser.add_argument("--target", required=required, metavar="TARGET", help=TARGET_HELP + after)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("deploy", help="make a model ready for an ONNX Runtime release or ORT Mobile, checked",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="ONNX model")
    add_target_options(p, required=True)
    p.add_argument("-o", "--output", dest="out", required=True, type=file_destination, metavar="OUT",
                   help="file to write: OUT.onnx for ort-X.Y, OUT.ort for ort-mobile")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=AxBx...",
                   help="fix an input's whole shape (e.g. x=1x3x224x224); repeatable")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N|dynamic",
                   help="fix a dimension (batch=1, a named dim, or INPUT:AXIS=N) or make it dynamic "
                        "(batch=dynamic); repeatable")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.cli.progress_line import StderrProgress
    from onnxport.core.deploy.deploy import deploy
    from onnxport.core.deploy.shapes import parse_shape_options
    from onnxport.core.deploy.targets import parse_target

    target = parse_target(args.target)  # an unknown target is refused before anything is read
    request = parse_shape_options(args.shape, args.dim)
    result = deploy(args.model, target, args.out, request=request,
                    progress=StderrProgress(quiet=args.quiet, verbose=args.verbose), cancel=call_token())
    if args.json:
        json.dump({"deploy": result.to_dict()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(shown_lines(result.summary_lines()))
    return 0


def export_deploy_request(args: argparse.Namespace):
    """`export --target T [--shape ...] [--dim ...]`: (target, shape request) parsed before the
    export runs (a bad one writes nothing), or None without --target. `--dim NAME=dynamic` is the
    deploy's alone: it is taken out of the sizes the export's validation generates inputs with."""
    if not getattr(args, "target", None):
        return None
    from onnxport.core.deploy.shapes import DYNAMIC, parse_shape_options
    from onnxport.core.deploy.targets import parse_target

    target, request = parse_target(args.target), parse_shape_options(args.shape, args.dim)
    args.dim = [d for d in args.dim if d.rpartition("=")[2].strip().lower() != DYNAMIC]
    return target, request


def deploy_exported(request, model, quiet: bool):
    """The deploy step after an export: `model` (the export, or its quantized form) deployed beside
    itself (`<stem>.ort`, `<stem>.ort-X.Y.onnx`)."""
    from pathlib import Path

    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.cli.progress_line import StderrProgress
    from onnxport.core.deploy.deploy import deploy
    from onnxport.core.deploy.targets import deployed_name

    target, shapes = request
    model = Path(model)
    return deploy(model, target, model.with_name(deployed_name(model.stem, target.name)), request=shapes,
                  progress=StderrProgress(quiet=quiet), cancel=call_token())
