"""The app's dialogs: export choices, PyTorch import, errors, the trust prompt for program code."""
