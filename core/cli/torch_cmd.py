"""PyTorch sub-commands: `torch-export`, `artifacts`, `embed`.

    onnxport torch-export SOURCE -o OUT --mode training|inference [--task T] [--opset N]
            [--input NAME:DTYPE:DIMS ...] [--output-names A,B] [--quantize [--target C | --no-target]]
            [--artifacts DIR]
            [--trust-model-code]
    onnxport artifacts FORWARD.onnx -o DIR [--trainable ...] [--frozen ...] [--loss L] [--optimizer O]
    onnxport embed GRAPH_OR_ORTMODULE_FOLDER STATE_DICT -o OUT [--outputs A,B] [--prefix P] [--allow-partial]
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.cli.export_cmd import split_names
from onnxport.core.cli.interrupts import call_token
from onnxport.core.cli.progress_line import StderrProgress, add_verbosity, brief
from onnxport.core.pytorch.presets import POOLING_MODES, TASKS
from onnxport.core.training.choices import LOSSES, OPTIMIZERS
from onnxport.core.util.out_paths import file_destination
from onnxport.core.util.text import shown

TRUST_HINT = "pass --trust-model-code if you trust where it came from"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("torch-export", help="export a TorchScript .pt, .pt2 or Hugging Face folder to ONNX",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="TorchScript .pt, torch.export .pt2, or Hugging Face model folder")
    p.add_argument("-o", "--output", dest="out", required=True, type=file_destination, metavar="OUT.onnx")
    p.add_argument("--mode", choices=("training", "inference"), required=True,
                   help="training: forward graph for on-device training; inference: deployable model")
    p.add_argument("--task", choices=TASKS, help="Hugging Face task preset (inputs/outputs/dynamic axes)")
    p.add_argument("--opset", type=int, help="ONNX opset (default: 16 training, 14 inference)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE:DIMS",
                   help="input spec, e.g. x:float32:batch,3,224,224 (names are dynamic dims); repeat per input")
    p.add_argument("--output-names", action="append", default=[], metavar="A[,B...]", help="ONNX output names")
    p.add_argument("--pooling", choices=POOLING_MODES,
                   help="pooling task: mean or first token (default: the folder's sentence-transformers Pooling "
                        "mode, else mean)")
    p.add_argument("--quantize", action="store_true",
                   help="also write a dynamic int8 model, <stem>.int8.onnx, to an accuracy target as `quantize` does")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--target", type=float, metavar="COSINE",
                        help="--quantize: min cosine per output vs the float32 model (default 0.99)")
    target.add_argument("--no-target", action="store_true",
                        help="--quantize: no accuracy target: quantize everything (exit 1 if its validation fails)")
    p.add_argument("--validation-inputs", metavar="DATA",
                   help="--quantize: inputs for its accuracy check (.npz, folder, or a .txt of sentences for a "
                        "Hugging Face folder's tokenizer; default: generated)")
    p.add_argument("--no-verify", action="store_true",
                   help="do not hold ONNX Runtime's results against PyTorch's (the model still runs in ONNX "
                        "Runtime at each size it declares)")
    p.add_argument("--artifacts", metavar="DIR", help="training mode: also generate training artifacts into DIR")
    p.add_argument("--trust-model-code", action="store_true",
                   help="run a TorchScript/.pt2 program: loading and running it executes its author's code "
                        "(not needed for Hugging Face folders)")
    _common(p)
    p.set_defaults(func=run_torch_export)

    a = subparsers.add_parser("artifacts", help="generate ONNX Runtime training artifacts from a forward graph")
    a.add_argument("forward", help="forward graph (e.g. from torch-export --mode training)")
    a.add_argument("-o", "--output", dest="out", required=True, metavar="DIR")
    _artifact_options(a)
    a.add_argument("--nominal", action="store_true", help="also write a nominal checkpoint")
    _common(a)
    a.set_defaults(func=run_artifacts)

    e = subparsers.add_parser("embed", help="embed a state_dict/safetensors/npz into a graph (e.g. ORTModule's)")
    e.add_argument("graph", help="ONNX graph, or a folder of ORTModule-saved graphs (<prefix>_torch_exported_*.onnx)")
    e.add_argument("state", help="parameters: .pt/.pth state_dict, .safetensors, .npz, checkpoint")
    e.add_argument("-o", "--output", dest="out", required=True, type=file_destination, metavar="OUT.onnx")
    e.add_argument("--outputs", action="append", default=[], metavar="A[,B...]", help="outputs (default: all)")
    e.add_argument("--prefix", help="ORTModule onnx_prefix, when the folder holds several models")
    e.add_argument("--external-data", choices=("auto", "always", "never"), default="auto")
    e.add_argument("--no-fold", action="store_true", help="do not fold parameter-only sub-graphs")
    e.add_argument("--allow-partial", action="store_true",
                   help="embed what matches even when the file does not fit the graph (lists what stayed)")
    _common(e)
    e.set_defaults(func=run_embed)


def _artifact_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trainable", action="append", metavar="NAMES",
                   help="trainable parameters: names or globs, comma-separated (default: all but BN statistics)")
    p.add_argument("--frozen", action="append", metavar="NAMES", help="frozen parameters: names or globs")
    p.add_argument("--loss", choices=tuple(LOSSES), default="crossentropy")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adamw")
    p.add_argument("--loss-input", metavar="OUTPUT", help="forward output the loss reads (default: the first)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_verbosity(p)


def _names(values: list[str] | None) -> list[str] | None:
    return split_names(values) if values else None


def _print(report: dict, args: argparse.Namespace, lines: list[str]) -> None:
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for line in brief(lines, args.verbose):  # the before/after table with -v
            print(shown(line))


def run_torch_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from onnxport.core.evaluate.model_diff import diff_lines
    from onnxport.core.evaluate.report import build_report
    from onnxport.core.pytorch.sources import parse_input_spec
    from onnxport.core.pytorch.trust import UntrustedProgramError
    from onnxport.core.util.errors import OnnxportError
    from onnxport.core.workflow.torch_import import TorchImportOptions, run_import
    from onnxport.core.workflow.torch_int8 import DEFAULT_TARGET

    if args.artifacts and args.mode != "training":
        raise OnnxportError("--artifacts needs --mode training")
    if (args.no_target or args.target is not None or args.validation_inputs) and not args.quantize:
        raise OnnxportError("--target, --no-target and --validation-inputs are options of --quantize")
    specs = [parse_input_spec(s) for s in args.input] or None
    options = TorchImportOptions(
        Path(args.source), Path(args.out), mode=args.mode, task=args.task, opset=args.opset, inputs=specs,
        output_names=_names(args.output_names), pooling=args.pooling, quantize=args.quantize,
        quantize_target=None if args.no_target else (args.target if args.target is not None else DEFAULT_TARGET),
        artifacts_dir=Path(args.artifacts) if args.artifacts else None, verify=not args.no_verify,
        validation_inputs=Path(args.validation_inputs) if args.validation_inputs else None,
        trust_code=args.trust_model_code)
    try:
        imported = run_import(options, progress=StderrProgress(quiet=args.quiet, verbose=args.verbose),
                              cancel=call_token())
    except UntrustedProgramError as exc:
        raise OnnxportError(str(exc), hint=TRUST_HINT) from None
    result, arts, quantized = imported.export, imported.artifacts, imported.quantized
    report = {"torch_export": result.to_dict()}
    diff = f", max |ORT - PyTorch| {result.max_abs_diff:.2e}" if result.max_abs_diff is not None else ""
    lines = [f"wrote {result.path} ({result.mode}, opset {result.opset}{', task ' + result.task if result.task else ''}):"
             f" inputs {', '.join(result.inputs)}; outputs {', '.join(result.outputs)}{diff}"]
    lines += [f"note: {n}" for n in result.notes]
    if quantized is not None:  # reported as `onnxport quantize` reports it
        full = build_report(quantize=quantized)
        report["quantize"] = full["quantize"]
        report["passed"] = full["passed"]
        lines += quantized.summary_lines() + (["before/after:"] + diff_lines(full["diff"]) if "diff" in full else [])
    if arts is not None:
        report["artifacts"] = arts.to_dict()
        lines += _artifact_lines(arts)
    _print(report, args, lines)
    return 0 if quantized is None or quantized.validation is None or quantized.validation.passed else 1


def _artifact_lines(arts) -> list[str]:
    lines = [f"wrote training artifacts to {arts.folder}: {len(arts.trainable)} trainable, {len(arts.frozen)} frozen, "
             f"loss {arts.loss} on {arts.loss_input or '(model output)'}, optimizer {arts.optimizer}"]
    lines += [f"repaired: {r}" for r in arts.repairs]
    return lines + [f"note: {n}" for n in arts.notes]


def run_artifacts(args: argparse.Namespace) -> int:
    from onnxport.core.training.artifacts import generate_training_artifacts

    arts = generate_training_artifacts(args.forward, args.out, trainable=_names(args.trainable),
                                       frozen=_names(args.frozen), loss=args.loss, optimizer=args.optimizer,
                                       loss_input=args.loss_input, nominal=args.nominal,
                                       progress=StderrProgress(quiet=args.quiet, verbose=args.verbose),
                                       cancel=call_token())
    _print({"artifacts": arts.to_dict()}, args, _artifact_lines(arts))
    return 0


def run_embed(args: argparse.Namespace) -> int:
    from onnxport.core.workflow.ortmodule import embed_state_dict

    result = embed_state_dict(args.graph, args.state, args.out, _names(args.outputs), prefix=args.prefix,
                              external_data=args.external_data, fold=not args.no_fold,
                              allow_partial=args.allow_partial,
                              progress=StderrProgress(quiet=args.quiet, verbose=args.verbose),
                              cancel=call_token())
    match = result.alignment.match
    report = {"embed": {"graph": str(result.graph), "alignment": result.alignment.summary(),
                        "unused": result.alignment.unused, "missing": match.missing if match else [],
                        "stayed": result.stayed},
              "export": result.export.to_dict()}
    lines = [f"wrote {result.export.path}: graph {result.graph.name}, outputs {', '.join(result.export.outputs)}",
             f"parameters: {result.alignment.summary()}"]
    if result.alignment.unused:
        lines.append(f"not used by the graph: {', '.join(result.alignment.unused)}")
    if result.stayed:
        lines.append(f"partial embed: {len(result.stayed)} graph weights kept their own values: "
                     f"{', '.join(result.stayed)}")
    _print(report, args, lines)
    return 0
