"""Tests on real pretrained models shipped inside PyPI packages (see models.txt)."""
