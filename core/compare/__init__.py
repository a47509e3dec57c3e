"""Compare two models or two checkpoints: structure, numbers, and where they first part."""
