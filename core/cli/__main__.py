"""`python -m onnxport.core.cli ...` is the same as `onnxport ...`."""

from onnxport.core.cli import run

run()
