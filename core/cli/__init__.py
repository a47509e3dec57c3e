"""`onnxport ...`: the command-line front end over the core.

Each sub-command lives in its own module exposing ``register(subparsers)``; the parser it adds
sets ``func`` to a callable taking the parsed arguments and returning an exit code.
User errors (`OnnxportError`) end with one line on stderr and exit code 2, never a traceback.

Signals: this entry point (never the core) turns SIGTERM into a `Terminated` exception and SIGINT
into `KeyboardInterrupt`, so the core's `finally`/`with` blocks remove the temps of a write in
progress; the run ends with one line naming the files it did put in place (util/written_files.py) and
exit 143 (SIGTERM) or 130 (SIGINT). A repeated signal is ignored while that cleanup runs. SIGKILL cannot be caught: the next write to the same path
removes the dead run's temps (core/util/atomic.py).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from onnxport.core.cli.error_output import EXIT_BROKEN_PIPE, report_error, silence_stdout, stdout_closed
from onnxport.core.util import signal_shield
from onnxport.core.util.errors import OnnxportError, cannot_read
from onnxport.core.util.written_files import WrittenFiles, interrupted_line

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
    "torch_cmd",
    "deploy_cmd",
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


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt: no `except Exception` in the core
    may swallow it, and every `finally` on the way up runs."""


def _raise_on_signal(signum, frame) -> None:
    if signal_shield.shielded():  # raised later, at a safe point (util/signal_shield.py)
        signal_shield.hold(signum)
        return
    for sig in (signal.SIGINT, signal.SIGTERM):  # one signal is enough: let the cleanup finish
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM/SIGINT raise in the main thread while the command runs; the handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the parent set to be ignored (`nohup`, `cmd &` in a script) stays ignored
    previous = {sig: signal.signal(sig, _raise_on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USER_ERROR
    watcher = WrittenFiles(args.out) if getattr(args, "out", None) else None  # what an interrupt leaves
    as_json = bool(getattr(args, "json", False))  # errors are JSON on stdout too (error_output.py)
    with signals_raise():
        try:
            return int(args.func(args) or 0)
        except OnnxportError as exc:
            done = watcher.written() if watcher is not None else []  # e.g. the export, before its quantization failed
            kept = f"; already written: {', '.join(str(p) for p in done)}" if done else ""
            report_error(f"{exc.one_line()}{kept}", type(exc).__name__, as_json)
            return EXIT_USER_ERROR
        except BrokenPipeError as exc:  # `onnxport inspect --json | head`: the reader is gone
            if stdout_closed():
                return EXIT_BROKEN_PIPE
            report_error(str(exc.strerror or exc), "OSError", as_json)
            return EXIT_USER_ERROR
        except OSError as exc:  # disk full, permission denied... outside what the core anticipated
            if isinstance(exc, FileNotFoundError) and exc.filename:
                report_error(str(cannot_read(exc.filename, exc)), "OSError", as_json)
                return EXIT_USER_ERROR
            where = f"{exc.filename}: " if exc.filename else ""
            report_error(f"{where}{exc.strerror or exc}", "OSError", as_json)
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            from onnxport.core.util.atomic import remove_live_temps  # imported when needed: a quick start

            remove_live_temps()  # the core's `finally` blocks did it; this is a safety net
            print(interrupted_line("interrupted", watcher), file=sys.stderr)
            return EXIT_SIGINT
        except Terminated:
            from onnxport.core.util.atomic import remove_live_temps

            remove_live_temps()
            print(interrupted_line("terminated by SIGTERM", watcher), file=sys.stderr)
            return EXIT_SIGTERM


def run() -> None:  # pragma: no cover - console entry point
    code = main()
    try:
        sys.stdout.flush()  # what is still buffered: the reader may have gone meanwhile
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    if code == EXIT_BROKEN_PIPE:
        silence_stdout()  # the interpreter's own last flush would print a BrokenPipeError
    sys.exit(code)
