"""`onnxport ...`: the command-line front end over the core.

Each sub-command lives in its own module exposing ``register(subparsers)``; the parser it adds
sets ``func`` to a callable taking the parsed arguments and returning an exit code.
User errors (`OnnxportError`) end with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import OnnxportError

EXIT_USER_ERROR = 2

# Sub-command modules, in the order `onnxport --help` lists them.
COMMAND_MODULES = [
    "inspect_cmd",
    "export_cmd",
    "quantize_cmd",
    "validate_cmd",
    "bench_cmd",
    "torch_cmd",
    "gui_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    from ... import core

    parser = argparse.ArgumentParser(
        prog="onnxport",
        description="Turn trained models into deployable ONNX inference models.",
    )
    parser.add_argument("--version", action="version", version=f"onnxport {core.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USER_ERROR
    try:
        return int(args.func(args) or 0)
    except OnnxportError as exc:
        print(f"onnxport: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as exc:  # disk full, permission denied... outside what the core anticipated
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"onnxport: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("onnxport: interrupted; nothing was written", file=sys.stderr)
        return 130


def run() -> None:  # pragma: no cover - console entry point
    sys.exit(main())
