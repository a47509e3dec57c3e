"""The log dock follows new lines, unless the user scrolled up to read (issue 15, cut 12)."""

from __future__ import annotations


def test_log_follows_new_lines_unless_scrolled_up(qtbot, window):
    bar = window.log.verticalScrollBar()
    for i in range(200):
        window.log_line(f"line {i}")
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=300_000)
    assert bar.value() == bar.maximum()  # at the newest line
    bar.setValue(bar.maximum() // 2)  # the user scrolls up to read
    for i in range(20):
        window.log_line(f"more {i}")
    assert bar.value() == bar.maximum() // 2 or bar.value() < bar.maximum()  # left where the user is
    bar.setValue(bar.maximum())  # back at the bottom: follows again
    window.log_line("newest")
    assert bar.value() == bar.maximum()
    assert window.log.toPlainText().endswith("newest")


def test_log_shown_later_opens_at_the_newest_line(qtbot, window):
    from PySide6.QtWidgets import QDockWidget

    dock = window.findChild(QDockWidget)
    dock.hide()  # the user closed the log; lines keep coming
    for i in range(300):
        window.log_line(f"line {i}")
    dock.show()
    bar = window.log.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=300_000)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=300_000)


def test_log_asks_for_the_system_fixed_pitch_font(window):
    """The log shows the before/after table as text columns: a fixed-pitch font keeps them aligned.
    What the app controls is checked (issue 26 item 8), not which face the machine's fonts resolve it
    to: the system's fixed font, asked as fixed-pitch and typewriter-styled."""
    from PySide6.QtGui import QFont, QFontDatabase

    font, system = window.log.font(), QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    assert font.family() == system.family() and font.pointSizeF() == system.pointSizeF()
    assert font.fixedPitch()
    assert font.styleHint() == QFont.StyleHint.TypeWriter


def test_a_report_s_lines_go_in_at_once_and_the_log_follows(qtbot, window):
    bar = window.log.verticalScrollBar()
    window.log_lines([f"line {i}" for i in range(300)])
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=300_000)
    assert bar.value() == bar.maximum()
    lines = window.log.toPlainText().splitlines()
    assert lines[-300].endswith("  line 0") and lines[-1].endswith("  line 299")
    window.log_lines([])  # nothing to add: no empty line
    assert window.log.toPlainText().splitlines()[-1].endswith("  line 299")
