"""`onnxport ...`: the command-line front end over the core.

Each sub-command lives in its own module exposing ``register(subparsers)``; the parser it adds
sets ``func`` to a callable taking the parsed arguments and returning an exit code.
The one boundary (`main`): user errors (`OnnxportError`, `OSError`) end with one line on stderr
and exit code 2; any other exception (a bug, or a library failing in a way the core did not foresee)
ends with one line "internal error: ... (details in <log>)" and exit code 70 (sysexits' EX_SOFTWARE),
its traceback written to the error log the app shares (util/error_log.py); never a traceback.

Signals (cli/interrupts.py): SIGINT/SIGTERM cancel the token each core call gets (`call_token()`);
the core stops at its next check and removes its temps; the run ends with one line naming the files
it did put in place (util/written_files.py) and exit 130 (SIGINT) or 143 (SIGTERM). A second signal
exits at once. SIGKILL cannot be caught: the next write to the same path removes the dead run's
temps (core/util/atomic.py).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from onnxport.core.cli.error_output import (
    EXIT_BROKEN_PIPE,
    internal_error_exit,
    parse_args,
    report_error,
    silence_stdout,
    stdout_closed,
)
from onnxport.core.cli.interrupts import Interrupts, exit_code
from onnxport.core.util.errors import OnnxportError, cannot_read
from onnxport.core.util.written_files import WrittenFiles

EXIT_USER_ERROR = 2
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM

# Sub-command modules, in the order `onnxport --help` lists them.
COMMAND_MODULES = [
    "inspect_cmd",
    "export_cmd",
    "quantize_cmd",
    "validate_cmd",
    "bench_cmd",
    "runtimes_cmd",
    "torch_cmd",
    "deploy_cmd",
    "compare_cmd",
    "gui_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    from onnxport import core

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
    args = parse_args(parser, argv)  # with --json, a usage error is JSON on stdout too
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USER_ERROR
    watcher = WrittenFiles(args.out) if getattr(args, "out", None) else None  # what an interrupt leaves
    as_json = bool(getattr(args, "json", False))  # errors are JSON on stdout too (error_output.py)
    interrupts = Interrupts(watcher)
    with interrupts:
        code = None
        try:
            code = int(args.func(args) or 0)
        except KeyboardInterrupt:  # main() run outside the main thread: no handler was installed
            interrupts.signum = interrupts.signum or signal.SIGINT
        except (OnnxportError, OSError) as exc:
            if interrupts.signum is None:  # else the error is the signal's doing (a cancel, a child's Ctrl-C)
                return _error_exit(exc, watcher, as_json)
        except Exception as exc:  # noqa: BLE001 - the boundary: any other error is one line, never a traceback
            if interrupts.signum is None:
                return internal_error_exit(exc, _written(watcher), as_json, argv)
        if interrupts.signum is None:
            return code
        from onnxport.core.util.atomic import remove_live_temps  # imported when needed: a quick start

        remove_live_temps()  # the core's own cleanup did it; this is a safety net
        print(interrupts.line(interrupts.signum), file=sys.stderr)
        return exit_code(interrupts.signum)


def _error_exit(exc: OnnxportError | OSError, watcher: WrittenFiles | None, as_json: bool) -> int:
    """One line on stderr (JSON on stdout with --json) for a user error; the exit code."""
    if isinstance(exc, OnnxportError):
        report_error(f"{exc.one_line()}{_written(watcher)}", type(exc).__name__, as_json)
        return EXIT_USER_ERROR
    if isinstance(exc, BrokenPipeError):  # `onnxport inspect --json | head`: the reader is gone
        if stdout_closed():
            return EXIT_BROKEN_PIPE
        report_error(str(exc.strerror or exc), "OSError", as_json)
        return EXIT_USER_ERROR
    # disk full, permission denied... outside what the core anticipated
    if isinstance(exc, FileNotFoundError) and exc.filename:
        report_error(str(cannot_read(exc.filename, exc)), "OSError", as_json)
        return EXIT_USER_ERROR
    where = f"{exc.filename}: " if exc.filename else ""
    report_error(f"{where}{exc.strerror or exc}", "OSError", as_json)
    return EXIT_USER_ERROR


def _written(watcher: WrittenFiles | None) -> str:
    """"; already written: ..." for the files the run put in place (e.g. the export, before its
    quantization failed), else ""."""
    done = watcher.written() if watcher is not None else []
    return f"; already written: {', '.join(str(p) for p in done)}" if done else ""


def run() -> None:  # pragma: no cover - console entry point
    code = main()
    try:
        sys.stdout.flush()  # what is still buffered: the reader may have gone meanwhile
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    if code == EXIT_BROKEN_PIPE:
        silence_stdout()  # the interpreter's own last flush would print a BrokenPipeError
    sys.exit(code)
