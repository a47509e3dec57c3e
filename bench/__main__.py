"""`python -m bench [NAME ...]`: run the benchmark suites (all by default), each in its own process.

Each suite is a module `bench.<name>` with a `main()` that prints a table and writes
`build/bench/<name>.json`. Separate processes keep one suite's memory out of another's peak RSS.
"""

from __future__ import annotations

import subprocess
import sys

SUITES = ["startup_bench", "export_bench", "checkpoint_bench", "gui_bench", "preview_bench", "quant_bench", "decoder_bench", "cut_bench",
          "decoder_app_bench", "compare_bench", "decoder_int4_bench"]


def main(argv: list[str]) -> int:
    names = argv or SUITES
    failed = []
    for name in names:
        print(f"\n=== bench: {name} ===", flush=True)
        code = subprocess.call([sys.executable, "-m", f"bench.{name}"])
        if code:
            failed.append(name)
    if failed:
        print(f"\nbench: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
