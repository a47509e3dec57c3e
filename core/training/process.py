"""The parent side of the training boundary: one child in the training environment.

`TrainingProcess` runs the operations of `runner.py` under the training environment's Python
through the one child protocol (util/child_call.py: framed messages, progress, one cancel
semantics, errors as one line). One process serves many calls, so importing
`onnxruntime.training` (which imports torch) is paid once per session, not per call; a call after
a cancel or a crash starts a fresh one. On cancel the call raises `Cancelled`; the caller, who
handed the child only temp paths, removes them. A child that dies ends the call with one line
naming its exit status and its last stderr line. Paths go to the child as `Path` values in
`args` (top level or in lists): `call` makes them absolute, since the child runs in another folder.

    with TrainingProcess() as training:
        training.call("artifacts", {...}, progress=..., cancel=...)
"""

from __future__ import annotations

import os
from pathlib import Path

from onnxport.core.training.environment import require_training_python
from onnxport.core.util.child_call import ISOLATED, Child
from onnxport.core.util.progress import CancelToken, ProgressFn

__all__ = ["ISOLATED", "RUNNER", "TrainingProcess", "wire_args"]

RUNNER = Path(__file__).with_name("runner.py")
RUNNER_MODULE = "onnxport.core.training.runner"  # loaded from RUNNER there: onnxport is not installed


class TrainingProcess:
    """A child in the training environment; a context manager (closing stops it)."""

    def __init__(self, python: str | Path | None = None) -> None:
        self.python = Path(python) if python else require_training_python()
        self._child = Child(self.python, label="the training environment's process")

    def __enter__(self) -> TrainingProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The child's process id while one runs."""
        return self._child.pid

    def call(self, op: str, args: dict, *, progress: ProgressFn | None = None,
             cancel: CancelToken | None = None) -> dict:
        """Run one operation of runner.py in the child; its result dict, or `OnnxportError` with one line."""
        return self._child.call(f"{RUNNER_MODULE}:{op}", wire_args(args), progress=progress, cancel=cancel)

    def close(self) -> None:
        """Stop the child."""
        self._child.close()


def wire_args(args: dict) -> dict:
    """`args` as the child reads them: every `Path` (top level or in a list) made absolute here, in
    the caller's current folder (the child's is another); other values as they are."""
    def wire(value):
        if isinstance(value, Path):
            return os.path.abspath(value)
        if isinstance(value, list | tuple):
            return [wire(v) for v in value]
        return value
    return {key: wire(value) for key, value in args.items()}
