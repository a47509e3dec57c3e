"""onnxport core: the Qt-free library behind the CLI and the app.

Data flows one way: files -> index -> selection -> plan -> written model -> report.
Long operations take a ``progress`` callback and a ``cancel`` token and never print.
"""

__version__ = "0.1.0"
