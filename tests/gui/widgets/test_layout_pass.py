"""one_layout_pass: parts shown inside the block are laid out once, in a later turn, not at once."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gui


def panel(qtbot):
    from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

    outer = QWidget()
    qtbot.addWidget(outer)
    inner = QWidget(outer)
    QVBoxLayout(outer).addWidget(inner)
    layout = QVBoxLayout(inner)
    labels = [QLabel(f"part {i} " * 20, wordWrap=True) for i in range(4)]
    for label in labels:
        layout.addWidget(label)
    labels[1].hide()
    labels[2].hide()
    outer.resize(300, 400)
    outer.show()
    qtbot.waitExposed(outer, timeout=300_000)
    return outer, inner, labels


def test_parts_shown_in_the_block_are_laid_out_once_later(qtbot):
    from onnxport.gui.widgets.layout_pass import one_layout_pass

    _outer, inner, labels = panel(qtbot)
    last_y = labels[3].y()
    with one_layout_pass(inner):
        labels[1].show()
        labels[2].show()
        assert labels[3].y() == last_y  # no layout pass yet: the window was not laid out twice
    assert inner.layout().isEnabled()
    qtbot.waitUntil(lambda: labels[3].y() > last_y, timeout=300_000)  # one pass, posted
    assert labels[1].y() < labels[2].y() < labels[3].y() and labels[2].height() > 0


def test_without_the_block_each_show_lays_out_at_once(qtbot):
    """What the block saves: a child shown in a visible widget lays out its ancestors at once."""
    _outer, _inner, labels = panel(qtbot)
    last_y = labels[3].y()
    labels[1].show()
    assert labels[3].y() > last_y


def test_a_nested_block_leaves_the_outer_one_in_charge(qtbot):
    from onnxport.gui.widgets.layout_pass import one_layout_pass

    _outer, inner, labels = panel(qtbot)
    last_y = labels[3].y()
    with one_layout_pass(inner):
        with one_layout_pass(inner):
            labels[1].show()
        assert not inner.layout().isEnabled() and labels[3].y() == last_y
    assert inner.layout().isEnabled()
    qtbot.waitUntil(lambda: labels[3].y() > last_y, timeout=300_000)
