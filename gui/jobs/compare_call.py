"""The compare view's core call as a job: `compare_job(a, b, ...)` is a Qt-free `fn(progress, cancel)`.

The comparison runs in a child process (core/util/child_call.py): it parses both models, runs
them in ONNX Runtime and holds the GIL in long stretches; the app only gets plain data back
(`compare_for_app`: the report as a dict, the two graphs weight-free for the preview). A cancel
reaches the child's token.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def compare_job(a: Path, b: Path, checkpoints_a: Sequence[Path] = (), checkpoints_b: Sequence[Path] = ()):
    def run(progress, cancel):
        from onnxport.core.compare.compare import compare_for_app
        from onnxport.core.util.child_call import call_in_child

        return call_in_child(compare_for_app, str(a), str(b), checkpoints_a=[str(c) for c in checkpoints_a],
                             checkpoints_b=[str(c) for c in checkpoints_b], progress=progress, cancel=cancel)

    return run
