"""`python -m onnxport.core.cli ...` is the same as `onnxport ...`."""

from . import run

run()
