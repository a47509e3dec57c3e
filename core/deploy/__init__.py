"""Deploy targets: an ONNX Runtime release, ORT Mobile, fixed or dynamic input shapes (deploy.py)."""
