"""`onnxport export MODEL [--checkpoint CKPT ...] [--outputs A[,B...]] -o OUT.onnx ...`.

Writes a self-contained inference model: the chosen outputs only, trained weights embedded,
training-only parts gone, eval-mode ops in inference form, parameter-only sub-graphs folded.
In a torchrun/MPI job only rank 0 writes unless --all-ranks is given. Without --outputs it keeps
the suggested outputs (`onnxport inspect` lists them); export_review.py checks what it would do first.
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.deploy_cmd import add_target_options
from onnxport.core.cli.input_options import add_input_options, input_sizes
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity, brief
from onnxport.core.export.options import EXTERNAL_DATA_CHOICES
from onnxport.core.util.out_paths import file_destination
from onnxport.core.util.text import human_size, shown


def split_names(values: list[str]) -> list[str]:
    """`--outputs a,b --outputs c` -> ['a', 'b', 'c']."""
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export an inference model (prune, embed trained weights)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="eval model (or any ONNX model)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="CKPT",
                   help="training checkpoint / parameter file (repeatable: several are merged)")
    p.add_argument("--outputs", action="append", metavar="A[,B...]",
                   help="tensors to keep as outputs, in order (graph outputs or any intermediate tensor); "
                        "default: the suggested outputs 'onnxport inspect' prints")
    p.add_argument("--from", dest="starts", action="append", metavar="T1[,T2...]",
                   help="intermediate tensors to make the graph's inputs: the model is cut there (the source's "
                        "inputs still needed stay, and are said)")
    p.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                   help="rename an input or output of the exported model (repeatable, or OLD=NEW,OLD2=NEW2)")
    p.add_argument("-o", "--output", dest="out", required=True, type=file_destination, metavar="OUT.onnx", help="file to write")
    p.add_argument("--external-data", choices=EXTERNAL_DATA_CHOICES, default="auto",
                   help="store weights in OUT.onnx.<run id>.data, beside OUT.onnx: auto (above 2 GB), always, never")
    p.add_argument("--no-fold", action="store_true",
                   help="do not fold parameter-only sub-graphs (write the graph as ONNX Runtime's export would)")
    p.add_argument("--quantize", choices=("dynamic", "static", "fp16", "int4"), help="quantize/convert after export")
    p.add_argument("--calibration", metavar="DATA", help="calibration data for --quantize static")
    p.add_argument("--validate", action="store_true", help="check the result against the reference")
    add_input_options(p)
    add_target_options(p, required=False)  # then deployed beside it, --shape/--dim fixed (deploy_cmd.py)
    p.add_argument("--allow-partial", action="store_true",
                   help="embed a checkpoint that fits the model only partly (what stayed as it was is listed)")
    p.add_argument("--keep-parameter-inputs", action="store_true",
                   help="export without --checkpoint although parameter-like inputs (fc1.weight...) stay inputs")
    p.add_argument("--all-ranks", action="store_true", help="write on every rank of a distributed job")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_verbosity(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.cli.deploy_cmd import deploy_exported, export_deploy_request
    from onnxport.core.cli.export_review import dangling_error
    from onnxport.core.cli.export_review import notes as review_notes
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.graph.rename_ends import parse_renames
    from onnxport.core.params.checkpoint_fit import UnfilledParameterInputs
    from onnxport.core.workflow.companion_names import check_companions
    from onnxport.core.workflow.export_job import ExportRequest, PostExportFailed, export_files

    deploy_after = export_deploy_request(args)  # a bad --target/--shape/--dim: nothing written
    check_companions(args.out, args.quantize, args.validate, [args.model, *args.checkpoint, args.calibration])
    notes: list[str] = []
    request = ExportRequest(split_names(args.outputs or []), args.out, external_data=args.external_data, fold=not args.no_fold,
                            validate=args.validate, quantize=args.quantize, calibration=args.calibration,
                            all_ranks=args.all_ranks, **input_sizes(args),
                            deploy=None if deploy_after is None else (
                                lambda final: deploy_exported(deploy_after, final, args.quiet)),
                            exported=lambda result: _exported_notes(result, notes),
                            allow_partial=args.allow_partial, keep_parameter_inputs=args.keep_parameter_inputs,
                            starts=split_names(args.starts or []), renames=parse_renames(args.rename))
    # the one pipeline the app runs too (workflow/export_job.py), on the model's session, in this
    # process, on one stderr bar; the review's notes are said once the export is written
    try:
        outcome = export_files(args.model, args.checkpoint, request,
                               StderrProgress(quiet=args.quiet, verbose=args.verbose), call_token(),
                               reviewed=lambda review: notes.extend(review_notes(review, args.quiet)))
    except PostExportFailed as exc:  # the CLI says the step's own error (the export stays written)
        raise exc.__cause__ from None
    except UnfilledParameterInputs as exc:  # the core's refusal, in the CLI's options
        raise dangling_error(args.model, exc.names) from None
    result, post, deployed = outcome.export, outcome.post, outcome.deployed
    if result.skipped:
        print(shown(f"onnxport: {result.skipped}; nothing to do here"), file=sys.stderr)
        return 0
    report = {"export": result.to_dict()}
    if post is not None:
        report.update(post.to_dict())
    if deployed is not None:
        report["deploy"] = deployed.to_dict()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        data = f" + {result.data_path.name}" if result.data_path else ""
        print(shown(f"wrote {result.path}{data}: {human_size(result.size_bytes)}, outputs {', '.join(result.outputs)}, "
                    f"inputs {', '.join(result.inputs) or '(none)'}, {result.nodes} nodes, {result.parameters} "
                    f"initializers, {result.folded} folded, {result.seconds:.2f} s"))
        for line in brief(report.get("summary_lines", []), args.verbose) + (deployed.summary_lines() if deployed else []):
            print(shown(line))
    return 0


def _exported_notes(result, notes: list[str]) -> None:
    """Said once the export is written, before the steps after it run."""
    for line in notes:  # the outputs defaulted to, training-only outputs: about what was written
        print(shown(line), file=sys.stderr)
    if result.new_inputs:  # --from: the cut, and the source's inputs still needed
        print(shown(f"onnxport: {result.cut_line()}"), file=sys.stderr)
    if result.partial:  # --allow-partial: what stayed as it was
        print(shown(f"onnxport: warning: {result.partial_line()}"), file=sys.stderr)
    if result.fixed_outputs:  # a Dropout mask, a Constant: the same value on every run
        from onnxport.core.graph.fixed_outputs import fixed_output_line

        for name, why in result.fixed_outputs.items():
            print(shown(f"onnxport: warning: {fixed_output_line(name, why)}"), file=sys.stderr)
