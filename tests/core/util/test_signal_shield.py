"""A CLI signal that comes inside a shield raises when the shield ends, not inside it
(util/signal_shield.py: raised inside Thread.start(), it corrupted a lock)."""

from __future__ import annotations

import signal

import pytest

from onnxport.core.cli import signals_raise
from onnxport.core.util.signal_shield import shield, shielded


def test_a_signal_inside_a_shield_raises_when_the_outermost_shield_ends():
    reached = []
    with signals_raise(), pytest.raises(KeyboardInterrupt):
        with shield():
            with shield():
                signal.raise_signal(signal.SIGINT)
                reached.append("inner")  # not raised here
            reached.append("outer")  # nor here: a shield is still up
            assert shielded()
        reached.append("after")  # raised as the outermost shield ended
    assert reached == ["inner", "outer"] and not shielded()


def test_without_a_signal_a_shield_changes_nothing():
    with signals_raise(), shield():
        pass
    assert not shielded()
