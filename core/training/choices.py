"""Losses and optimizers training artifacts can be generated with, by the names the CLI takes.

Kept apart from `artifacts.py` (which imports onnx) so that a parser can offer them cheaply.
"""

LOSSES = {"crossentropy": "CrossEntropyLoss", "mse": "MSELoss", "bcewithlogits": "BCEWithLogitsLoss",
          "l1": "L1Loss", "none": None}
OPTIMIZERS = {"adamw": "AdamW", "sgd": "SGD", "none": None}
