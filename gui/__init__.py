"""onnxport desktop app (PySide6). All Qt code lives here; the core never imports it."""
