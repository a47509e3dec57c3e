"""quantize"""

MODES = ("dynamic", "static", "fp16", "int4")  # here: the CLI lists them without importing the quantizers
