"""The training boundary: work that needs onnxruntime-training 1.19.2, run in its own environment.

`environment` finds that environment's Python; `process` runs `runner.py` there as a child and
carries requests, progress, cancel and errors across. ORT's own training API over that boundary
(train steps, ORT's export, what ORT reads from a checkpoint) is a test oracle: tests/support/ort_api.py.
"""
