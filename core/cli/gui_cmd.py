"""`onnxport gui [FILES...]`: start the desktop app in its own process.

The core never imports the app, not even lazily: this runs `python -m onnxport.gui`.
"""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gui", help="open the desktop app", description=__doc__)
    parser.add_argument("files", nargs="*", help="files or folders to open")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.util.child_call import child_command

    argv = child_command(sys.executable, "-m", "onnxport.gui", *args.files)  # isolated from the current folder
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return
