"""`onnxport runtimes [--json]`: the ONNX Runtime builds found and the execution providers of each.

This environment's onnxruntime, the environments the make targets create beside it
(`make runtime-openvino` -> .venv-openvino; likewise -gpu, -directml, -qnn) and the Pythons named
by ONNXPORT_RUNTIMES (paths separated by ':'). Each is asked by a child running in it: its ONNX
Runtime version, package and providers. `validate` and `bench` take `--providers` to run there.
"""

from __future__ import annotations

import argparse
import json
import sys

from onnxport.core.util.text import shown_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("runtimes", help="the ONNX Runtime builds found and their execution providers",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from onnxport.core.runtimes.discovery import find_runtimes
    from onnxport.core.runtimes.names import how_to_get

    runtimes = find_runtimes()
    if args.json:
        json.dump({"runtimes": [r.to_dict() for r in runtimes]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(shown_lines([r.line() for r in runtimes]))
    if len(runtimes) == 1:
        print(f"only this environment's ONNX Runtime: for OpenVINO, {how_to_get('OpenVINOExecutionProvider')}")
    return 0
