"""`python -m onnxport.gui [FILES...]`."""

from .app import run

run()
