"""Other ONNX Runtime builds and their execution providers, each in an environment of its own.

`names` (short and full provider names, how to install each), `discovery` (the environments and
what each runs), `probe` (the child's side, run in those environments with no onnxport), `run_on`
(a model on several providers against CPU), `report` (the per-provider report), `precision`.
"""
