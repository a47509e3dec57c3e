"""A child's function for another Python environment: standard library only (no onnxport there)."""

import sys


def describe(request, data, channel):
    channel.progress(1.0, "described")
    try:
        import onnxport  # noqa: F401
        has_onnxport = True
    except ImportError:
        has_onnxport = False
    return {"prefix": sys.prefix, "onnxport": has_onnxport, "got": request, "data": data.decode()}
