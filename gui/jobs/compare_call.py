"""The compare view's core call as a job: `compare_job(a, b, ...)` is a Qt-free `fn(progress, cancel)`.

The comparison runs in a child process (core/util/child_call.py): it parses both models, runs
them in ONNX Runtime and holds the GIL in long stretches; the app gets JSON back, nothing pickled
(`compare_in_child`: the report as a dict, the two graphs weight-free for the preview, decoded
here). A cancel reaches the child's token.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path


def compare_job(a: Path, b: Path, checkpoints_a: Sequence[Path] = (), checkpoints_b: Sequence[Path] = ()):
    def run(progress, cancel):
        from onnxport.core.util.child_call import run_in_child

        request = {"a": str(Path(a).absolute()), "b": str(Path(b).absolute()),
                   "checkpoints_a": [str(Path(c).absolute()) for c in checkpoints_a],
                   "checkpoints_b": [str(Path(c).absolute()) for c in checkpoints_b]}
        answer = run_in_child("onnxport.core.compare.compare:compare_in_child", request, progress=progress,
                              cancel=cancel, background=True)
        graphs = {k: base64.b64decode(v) for k, v in (answer.get("graphs") or {}).items()}
        return {"report": answer["report"], "graphs": graphs}

    return run
