"""A word-wrapped label answers its height per width from memory until its text, font or style change."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gui

TEXT = "<b>dynamic</b>: 161.3 MB, 0.25x the float32 size<br>" + "a tensor /model/layers.1/Add_1_output_0 " * 6


def test_heights_match_a_plain_label_and_follow_the_text_and_font(qtbot):
    from PySide6.QtWidgets import QLabel

    from onnxport.gui.widgets.wrapped_label import WrappedLabel

    label, plain = WrappedLabel(TEXT), QLabel(TEXT)
    plain.setWordWrap(True)
    for w in (label, plain):
        qtbot.addWidget(w)
    widths = (120, 300, 640)
    assert [label.heightForWidth(w) for w in widths] == [plain.heightForWidth(w) for w in widths]
    assert label.heightForWidth(120) > label.heightForWidth(640)  # it wraps
    short = label.heightForWidth(300)
    label.setText(TEXT * 3)
    assert label.heightForWidth(300) > short  # a new text is measured again
    grown = label.heightForWidth(300)
    font = label.font()
    font.setPointSizeF(font.pointSizeF() * 2)
    label.setFont(font)
    assert label.heightForWidth(300) > grown  # so is a new font
    label.clear()
    assert label.heightForWidth(300) < short


def test_a_layout_pass_measures_the_text_once_per_width(qtbot, monkeypatch):
    from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

    from onnxport.gui.widgets.wrapped_label import WrappedLabel

    measured: list[int] = []
    original = QLabel.heightForWidth

    def counting(self, width):
        measured.append(width)
        return original(self, width)

    monkeypatch.setattr(QLabel, "heightForWidth", counting)
    outer = QWidget()
    qtbot.addWidget(outer)
    inner = QWidget()
    QVBoxLayout(inner).addWidget(label := WrappedLabel(TEXT))
    QVBoxLayout(outer).addWidget(inner)
    outer.resize(400, 300)
    outer.show()
    for width in (400, 500, 400, 500):
        outer.resize(width, 300)
        outer.layout().activate()
        inner.layout().activate()
    assert label.height() > 0
    assert len(measured) == len(set(measured))  # each width measured once, then remembered
